"""Runs one row op on one shape a few times, for a profiler (ncu / nsys) to look at.

    python3 tools/profile_one.py layer_norm bwd 2048x65536 [--reps 3]
    ncu --kernel-name regex:bwd_cluster --launch-skip 2 --launch-count 1 \
        python3 tools/profile_one.py layer_norm bwd 2048x65536

ops: rms_norm / layer_norm (kinds fwd, fwd+res, bwd), softmax / log_softmax (fwd, bwd). bf16,
fresh random data; the kernel geometry follows the same knobs as the benches
(BARACUDA_NORM_CFG / BARACUDA_NORM_BWD_CFG / BARACUDA_SOFTMAX_CFG).
"""
import argparse
import os

import torch

import baracuda as bc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op")
    ap.add_argument("kind", choices=["fwd", "fwd+res", "bwd"])
    ap.add_argument("shape", help="ROWSxH")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeline", action="store_true",
                    help="print each kernel's mean duration and the mean span of one call (torch.profiler)")
    ap.add_argument("--cfg", action="append", default=[],
                    help="norm backward with --timeline: a BARACUDA_NORM_BWD_CFG value to time (repeatable; "
                         "'-' is the default), each through a freshly selected plan")
    a = ap.parse_args()
    rows, H = (int(v) for v in a.shape.split("x"))
    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(rows, H, device=dev, dtype=bf)
    w = torch.randn(H, device=dev, dtype=bf)
    b = torch.randn(H, device=dev, dtype=bf)
    g = torch.randn(rows, H, device=dev, dtype=bf)
    layer = a.op == "layer_norm"
    if a.op in ("softmax", "log_softmax"):
        y = getattr(bc, a.op)(x, -1)
        fn = getattr(bc, a.op + "_backward") if a.kind == "bwd" else getattr(bc, a.op)
        call = (lambda: fn(g, y, -1)) if a.kind == "bwd" else (lambda: fn(x, -1))
    elif a.kind == "bwd":
        if layer:
            _, mean, rstd = bc.layer_norm(x, w, b, save_stats=True)
            call = lambda: bc.layer_norm_backward(g, x, mean, rstd, w, b)  # noqa: E731
        else:
            _, rstd = bc.rms_norm(x, w, save_stats=True)
            call = lambda: bc.rms_norm_backward(g, x, rstd, w)  # noqa: E731
    else:
        res = g if a.kind == "fwd+res" else None
        call = (lambda: bc.layer_norm(x, w, b, residual=res)) if layer else (lambda: bc.rms_norm(x, w, residual=res))
    for _ in range(a.reps):
        call()
    torch.cuda.synchronize()
    if a.timeline and a.cfg and a.kind == "bwd" and a.op in ("rms_norm", "layer_norm"):
        st = (mean, rstd) if layer else (None, rstd)
        for cfg in a.cfg:
            print(f"-- BARACUDA_NORM_BWD_CFG={cfg}")
            timeline(norm_backward_plan_call(a.op, x, w, b if layer else None, g, st, cfg), a.reps)
    elif a.timeline:
        timeline(call, a.reps)


def norm_backward_plan_call(op, x, w, b, g, stats, cfg):
    """A norm backward through a plan selected under BARACUDA_NORM_BWD_CFG=cfg (the functional
    API caches plans, so an environment change would not reach it); outputs preallocated."""
    os.environ["BARACUDA_NORM_BWD_CFG"] = "" if cfg == "-" else cfg
    spec = bc.TensorSpec(tuple(x.shape), bc.bfloat16, list(x.stride()))
    d = bc.NormDescriptor(op + "_backward", spec, weight=bc.bfloat16, bias=bc.bfloat16 if b is not None else None)
    plan = bc.NormPlan.select(d)
    os.environ.pop("BARACUDA_NORM_BWD_CFG")
    ws = torch.empty(max(1, plan.workspace_bytes()), device=x.device, dtype=torch.uint8)
    gx, gw = torch.empty_like(x), torch.empty_like(w)
    gb = torch.empty_like(b) if b is not None else None

    def call():
        plan.run(grad_x=gx, grad_out=g, x=x, mean=stats[0], rstd=stats[1], weight=w, grad_weight=gw, grad_bias=gb,
                 workspace=ws)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    return call


def timeline(call, reps):
    """Kernel durations of `reps` calls, and the span of a call: the first kernel's start to the
    last one's end (the gaps between a call's kernels included)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    kern = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                  key=lambda e: e.time_range.start)
    per = len(kern) // reps
    names = {}
    for i, e in enumerate(kern):
        names.setdefault(i % per, []).append(e.time_range.elapsed_us())
    for i in range(per):
        v = sorted(names[i])
        print(f"kernel {i}: median {v[len(v) // 2]:8.1f} us  {kern[i].name[:90]}")
    spans = sorted(kern[r * per + per - 1].time_range.end - kern[r * per].time_range.start for r in range(reps))
    print(f"call span: median {spans[len(spans) // 2]:8.1f} us over {reps} calls, {per} kernels each")


if __name__ == "__main__":
    main()
