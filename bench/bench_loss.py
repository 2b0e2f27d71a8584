#!/usr/bin/env python3
"""Loss family: cross-entropy on large-vocabulary logits, baracuda against torch (same shapes, same
dtype, same timer, same run).

    python3 bench/bench_loss.py [--quick] [--rows REGEX]
    python3 bench/bench_loss.py --sweep      # time the cross-entropy cluster-path variants
    OUT=/tmp/out python3 bench/bench_loss.py   # also $OUT/bench_loss.{md,json,txt}

--sweep selects a plan with PlanPreference(tuning=...) for each variant in SWEEP on the key
shapes, times ours only (torch once per shape, for the ratio) and prints the best per row.

Rows: forward (loss, mean) vs torch.nn.functional.cross_entropy; fused forward + gradient vs torch
forward + autograd backward; pointwise losses; the row losses (cosine embedding, triplet, multi
margin, multilabel (soft) margin) and multi-operand gradients (mse wrt input and target, gaussian
wrt input, target and var), forward and forward + every gradient, vs torch forward + autograd.
GB/s counts the logits read once (+ the gradient written once for the fused rows), also as a
fraction of the copy bandwidth measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
SHAPES = [(8192, 128256), (4096, 32000)]
TOL = 2e-2


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), [int(s) for s in t.stride()])


# tuning variants (the keys of BARACUDA_CE_CFG) for --sweep ("" = the default selection).
SWEEP = ["", "path=chunked", "k=4,threads=512", "k=8,threads=128", "k=4,threads=256", "k=2,threads=512",
         "k=4,threads=128", "k=8,threads=256,cluster=4", "k=8,threads=256,cluster=16",
         "path=stream", "path=stream,iters=1", "path=stream,iters=4"]  # stream: forward only


def run_row(kind, shape, args, copy_gbs, cfg=None, with_torch=True):
    n, v = shape
    dt = torch.bfloat16
    nsets = 2  # each set is >= 0.25 GiB, far past L2
    sets = []
    for _ in range(nsets):
        x = torch.randn(shape, device=DEV, dtype=dt) * 2
        t = torch.randint(0, v, (n,), device=DEV)
        sets.append(dict(x=x, t=t, out=torch.empty((), device=DEV, dtype=dt), lse=torch.empty(n, device=DEV),
                         g=torch.empty(shape, device=DEV, dtype=dt) if kind == "fused" else None))
    s0 = sets[0]
    fused = kind == "fused"
    desc = bc.CrossEntropyLossDescriptor("cross_entropy", spec(s0["x"]), spec(s0["t"]), with_grad=fused,
                                         grad_input=spec(s0["g"]) if fused else None)
    plan = bc.LossPlan.select(desc, bc.PlanPreference(tuning=cfg or ""))
    ws = torch.empty(plan.workspace_bytes(), device=DEV, dtype=torch.uint8)

    def ours(i):
        s = sets[i]
        plan.run(s["x"], s["t"], s["lse"], ws, out=s["out"], grad_input=s["g"])

    def theirs(i):
        s = sets[i]
        if not fused:
            return F.cross_entropy(s["x"], s["t"])
        x = s["x"].detach().requires_grad_(True)
        loss = F.cross_entropy(x, s["t"])
        return loss, torch.autograd.grad(loss, x)[0]

    ours(0)
    ref = theirs(0)
    err = C.rel_err(s0["out"].float(), (ref[0] if fused else ref).float())
    if fused:
        err = max(err, C.rel_err(s0["g"], ref[1]))
    ok = err <= TOL
    benches = {"ours": C.GpuBench(ours, nsets)}
    if with_torch:
        benches["torch"] = C.GpuBench(theirs, nsets)
    tm = C.measure(benches, iters=args.iters, passes=args.passes)
    moved = n * v * 2 * (2 if fused else 1)
    g = moved / tm["ours"].median / 1e9
    precision = plan.sku.precision.math
    sets = None  # released; the closures above still name them
    C.free_memory()
    r = dict(key=f"cross_entropy {kind} bf16 {n}x{v}", sku=plan.sku.layout, us=tm["ours"].median * 1e6,
             gbs=g, copy_frac=g / copy_gbs, rel_err=err, ok=ok, precision=precision, timing={"ours": tm["ours"]})
    if with_torch:
        r.update(torch_us=tm["torch"].median * 1e6, torch_gbs=moved / tm["torch"].median / 1e9,
                 speedup=tm["torch"].median / tm["ours"].median)
        r["timing"]["torch"] = tm["torch"]
    return r


# Pointwise losses: (name, shape, dtype, call(bc/F module, x, y)) — one read of each operand.
POINTWISE = [
    ("mse_loss mean", (8192, 8192), torch.bfloat16, lambda m, x, y: m.mse_loss(x, y)),
    ("binary_cross_entropy_with_logits mean", (8192, 8192), torch.bfloat16,
     lambda m, x, y: m.binary_cross_entropy_with_logits(x, y)),
    ("smooth_l1_loss none", (8192, 8192), torch.bfloat16, lambda m, x, y: m.smooth_l1_loss(x, y, reduction="none")),
]


def run_pointwise(name, shape, dt, call, args, copy_gbs):
    nsets = 3
    sets = [(torch.randn(shape, device=DEV, dtype=dt), torch.rand(shape, device=DEV, dtype=dt)) for _ in range(nsets)]
    got = call(bc, *sets[0])
    ref = call(F, sets[0][0].double(), sets[0][1].double())
    err = C.rel_err(got.double(), ref)
    tm = C.measure({"ours": C.GpuBench(lambda i: call(bc, *sets[i]), nsets),
                    "torch": C.GpuBench(lambda i: call(F, *sets[i]), nsets)}, iters=args.iters, passes=args.passes)
    n = sets[0][0].numel()
    moved = n * sets[0][0].element_size() * (3 if "none" in name else 2)
    g = moved / tm["ours"].median / 1e9
    sets = None  # released; the closures above still name them
    C.free_memory()
    return dict(key=f"{name} {str(dt).replace('torch.', '')} {shape[0]}x{shape[1]}", sku="pointwise",
                us=tm["ours"].median * 1e6, torch_us=tm["torch"].median * 1e6, gbs=g,
                torch_gbs=moved / tm["torch"].median / 1e9, copy_frac=g / copy_gbs,
                speedup=tm["torch"].median / tm["ours"].median, rel_err=err, ok=err <= TOL,
                timing={"ours": tm["ours"], "torch": tm["torch"]})


# Row losses and multi-operand gradients: (name, kind, shape, dtype). "forward": the loss (mean);
# "fwd+bwd": the loss, then the gradients w.r.t. every differentiable operand (torch: forward +
# autograd). GB/s counts each operand read once (+ each gradient written once).
# 256 MiB of bf16 rows (the size for bandwidth numbers; at 16 MiB both sides measure their
# host overhead, ~35 us for torch and ~60 us for our Python wrappers, not the GPU).
ROW_LOSSES = [
    ("cosine_embedding_loss", "forward", (65536, 2048), torch.bfloat16),
    ("cosine_embedding_loss", "fwd+bwd", (65536, 2048), torch.bfloat16),
    ("triplet_margin_loss", "forward", (65536, 2048), torch.bfloat16),
    ("triplet_margin_loss", "fwd+bwd", (65536, 2048), torch.bfloat16),
    ("multi_margin_loss", "forward", (65536, 2048), torch.bfloat16),
    ("multi_margin_loss", "fwd+bwd", (65536, 2048), torch.bfloat16),
    ("multilabel_soft_margin_loss", "forward", (65536, 2048), torch.bfloat16),
    ("multilabel_soft_margin_loss", "fwd+bwd", (65536, 2048), torch.bfloat16),
    ("multilabel_margin_loss", "forward", (65536, 256), torch.float32),
    ("multilabel_margin_loss", "fwd+bwd", (65536, 256), torch.float32),
    ("mse_loss", "fwd+bwd", (8192, 8192), torch.bfloat16),             # wrt input and target
    ("gaussian_nll_loss", "fwd+bwd", (65536, 2048), torch.bfloat16),   # wrt input, target, var [N]
]


def _row_loss_case(name, shape, dt):
    """(float operands, the loss of (module, operands), our backward of (operands)): the first
    len(_ROW_WRT[name]) operands are differentiated."""
    n, c = shape
    x = lambda: torch.randn(shape, device=DEV, dtype=dt)  # noqa: E731
    one = torch.ones((), device=DEV, dtype=dt)
    wrt = _ROW_WRT[name]
    if name == "cosine_embedding_loss":
        y = torch.where(torch.rand(n, device=DEV) < 0.5, -1, 1)
        return ([x(), x()], lambda m, f: m.cosine_embedding_loss(f[0], f[1], y, 0.2),
                lambda f: bc.cosine_embedding_loss_backward(one, f[0], f[1], y, 0.2, wrt=wrt))
    if name == "triplet_margin_loss":
        return ([x(), x(), x()], lambda m, f: m.triplet_margin_loss(f[0], f[1], f[2]),
                lambda f: bc.triplet_margin_loss_backward(one, f[0], f[1], f[2], wrt=wrt))
    if name == "multi_margin_loss":
        y = torch.randint(0, c, (n,), device=DEV)
        return ([x()], lambda m, f: m.multi_margin_loss(f[0], y),
                lambda f: BC_NO_SYNC.multi_margin_loss_backward(one, f[0], y, wrt=wrt))
    if name == "multilabel_soft_margin_loss":
        t = torch.rand(shape, device=DEV).round().to(dt)
        return ([x(), t], lambda m, f: m.multilabel_soft_margin_loss(f[0], f[1]),
                lambda f: bc.multilabel_soft_margin_loss_backward(one, f[0], f[1], wrt=wrt))
    if name == "multilabel_margin_loss":
        y = torch.argsort(torch.rand(shape, device=DEV), dim=1)
        y[:, 8] = -1  # 8 targets per row
        return ([x()], lambda m, f: m.multilabel_margin_loss(f[0], y.to(f[0].device)),
                lambda f: BC_NO_SYNC.multilabel_margin_loss_backward(one, f[0], y, wrt=wrt))
    if name == "mse_loss":
        return ([x(), x()], lambda m, f: m.mse_loss(f[0], f[1]),
                lambda f: bc.mse_loss_backward(one, f[0], f[1], wrt=wrt))
    if name == "gaussian_nll_loss":
        var = (torch.rand(n, device=DEV) + 0.5).to(dt)
        return ([x(), x(), var], lambda m, f: m.gaussian_nll_loss(f[0], f[1], f[2]),
                lambda f: bc.gaussian_nll_loss_backward(one, f[0], f[1], f[2], wrt=wrt))
    raise ValueError(name)


_ROW_WRT = {"cosine_embedding_loss": ("input1", "input2"), "triplet_margin_loss": ("anchor", "positive", "negative"),
            "multi_margin_loss": ("input",), "multilabel_soft_margin_loss": ("input",),
            "multilabel_margin_loss": ("input",), "mse_loss": ("input", "target"),
            "gaussian_nll_loss": ("input", "target", "var")}


class _NoTargetCheck:
    """bc with check_targets=False on the losses that check class-index targets: torch's kernels
    do not sync on the host either, so both sides do the same work."""
    _CHECKED = {"multi_margin_loss", "multi_margin_loss_backward", "multilabel_margin_loss",
                "multilabel_margin_loss_backward", "nll_loss", "nll_loss_backward", "cross_entropy",
                "cross_entropy_backward"}

    def __getattr__(self, name):
        fn = getattr(bc, name)
        return (lambda *a, **k: fn(*a, check_targets=False, **k)) if name in self._CHECKED else fn


BC_NO_SYNC = _NoTargetCheck()


def run_row_loss(name, kind, shape, dt, args, copy_gbs):
    nsets = 3
    sets = [_row_loss_case(name, shape, dt) for _ in range(nsets)]
    fwd_only = kind == "forward"
    nd = len(_ROW_WRT[name])

    def ours(i):
        fl, loss_fn, back = sets[i]
        loss = loss_fn(BC_NO_SYNC, fl)
        return loss if fwd_only else (loss, back(fl))

    def theirs(i, double=False):
        fl, loss_fn, _ = sets[i]
        fl = [t.double() for t in fl] if double else fl
        if fwd_only:
            return loss_fn(F, fl)
        leaves = [t.detach().requires_grad_(k < nd) for k, t in enumerate(fl)]
        loss = loss_fn(F, leaves)
        return loss, torch.autograd.grad(loss, leaves[:nd])

    if name == "multilabel_margin_loss":  # torch's CUDA backward races (pytorch#84202): check against its CPU kernel
        fl0, loss_fn, _ = sets[0]
        cpu = [t.detach().double().cpu().requires_grad_(k < nd) for k, t in enumerate(fl0)]
        loss = loss_fn(F, cpu)
        ref = loss.to(DEV) if fwd_only else (loss.to(DEV), [g.to(DEV) for g in torch.autograd.grad(loss, cpu[:nd])])
        got = ours(0)
    else:
        got, ref = ours(0), theirs(0, double=True)
    if fwd_only:
        err = C.rel_err(got.double(), ref.double())
    else:
        err = C.rel_err(got[0].double(), ref[0].double())
        for a, b in zip(got[1], ref[1]):
            err = max(err, C.rel_err(a.double(), b.double()))
    del ref
    tm = C.measure({"ours": C.GpuBench(ours, nsets), "torch": C.GpuBench(theirs, nsets)}, iters=args.iters,
                   passes=args.passes)
    fl0 = sets[0][0]
    moved = sum(t.numel() * t.element_size() for t in fl0)
    if not fwd_only:
        moved += sum(t.numel() * t.element_size() for t in fl0[:nd])
    g = moved / tm["ours"].median / 1e9
    sets = None  # released; the closures above still name them
    C.free_memory()
    return dict(key=f"{name} {kind} {str(dt).replace('torch.', '')} {shape[0]}x{shape[1]}", sku="rows",
                us=tm["ours"].median * 1e6, torch_us=tm["torch"].median * 1e6, gbs=g,
                torch_gbs=moved / tm["torch"].median / 1e9, copy_frac=g / copy_gbs,
                speedup=tm["torch"].median / tm["ours"].median, rel_err=err, ok=err <= TOL,
                timing={"ours": tm["ours"], "torch": tm["torch"]})


def sweep(args, copy_gbs):
    """Every SWEEP variant on the key shapes; prints a table and the best variant per row."""
    lines = []
    for s in SHAPES:
        for kind in ("forward", "fused"):
            key = f"cross_entropy {kind} bf16 {s[0]}x{s[1]}"
            if not re.search(args.rows, key):
                continue
            base = run_row(kind, s, args, copy_gbs, cfg="", with_torch=True)
            best = None
            for cfg in SWEEP:
                try:
                    r = run_row(kind, s, args, copy_gbs, cfg=cfg, with_torch=False)
                except Exception as e:  # noqa: BLE001
                    lines.append(f"{key:44s} cfg={cfg or 'default':34s} error: {e}")
                    continue
                x = base["torch_us"] / r["us"]
                geo = r["precision"].split(";")[1].strip() if ";" in r["precision"] else ""
                lines.append(f"{key:44s} cfg={cfg or 'default':34s} {r['sku']:12s} {r['us']:8.1f} us "
                             f"{r['gbs']:6.0f} GB/s {100 * r['copy_frac']:4.0f}% copy x{x:4.2f} torch "
                             f"{'ok' if r['ok'] else 'WRONG'}  [{geo[:90]}]")
                print(lines[-1], flush=True)
                if r["ok"] and (best is None or r["us"] < best[1]):
                    best = (cfg, r["us"])
            if best:
                lines.append(f"BEST {key}: cfg='{best[0] or 'default'}' {best[1]:.1f} us "
                             f"(torch {base['torch_us']:.1f} us, x{base['torch_us'] / best[1]:.2f})")
                print(lines[-1], flush=True)
    return lines


# CTC loss: (kind, torch path) rows at T=500, N=32, C=64, S=100 f32 (padded targets, all inputs full
# length, target lengths 50..100). torch "native": device int64 targets; "cudnn": CPU int32
# concatenated targets and lengths (torch's cuDNN conditions). The recursions are latency-bound
# (T sequential steps per sample); GB/s counts log_probs read once (+ the gradient written once).
CTC_ROWS = [("forward", "native"), ("fwd+bwd", "native")]


def run_ctc(kind, path, args, copy_gbs, T=500, N=32, Cn=64, S=100):
    g = torch.Generator(device=DEV).manual_seed(5)
    nsets = 2
    sets = []
    for _ in range(nsets):
        lp = torch.log_softmax(torch.randn(T, N, Cn, device=DEV, generator=g), -1)
        tg = torch.randint(1, Cn, (N, S), device=DEV, generator=g)
        il = torch.full((N,), T, device=DEV, dtype=torch.int64)
        tl = torch.randint(S // 2, S + 1, (N,), device=DEV, generator=g)
        st = dict(lp=lp, tg=tg, il=il, tl=tl, out=torch.empty((), device=DEV), grad=torch.empty_like(lp))
        if path == "cudnn":
            st["tg_t"] = torch.cat([tg[i, :int(tl[i])] for i in range(N)]).to(torch.int32).cpu()
            st["il_t"], st["tl_t"] = il.to(torch.int32).cpu(), tl.to(torch.int32).cpu()
        else:
            st["tg_t"], st["il_t"], st["tl_t"] = tg, il, tl
        sets.append(st)
    s0 = sets[0]
    plan = bc.CtcLossPlan.select(bc.CtcLossDescriptor("ctc_loss", spec(s0["lp"]), spec(s0["tg"]), spec(s0["il"]),
                                                      spec(s0["tl"])))
    bplan = bc.CtcLossPlan.select(bc.CtcLossDescriptor(
        "ctc_loss_backward", spec(s0["lp"]), spec(s0["tg"]), spec(s0["il"]), spec(s0["tl"]),
        grad_loss=bc.TensorSpec((), bc.float32), grad_log_probs=spec(s0["grad"])))
    for st in sets:
        st["la"] = torch.empty(plan.log_alpha_shape(), device=DEV)
    ws = torch.empty(max(plan.workspace_bytes(), bplan.workspace_bytes()), device=DEV, dtype=torch.uint8)
    one = torch.ones((), device=DEV)
    fused = kind != "forward"

    def ours(i):
        st = sets[i]
        plan.run(st["lp"], st["tg"], st["il"], st["tl"], st["la"], ws, out=st["out"])
        if fused:
            bplan.run(st["lp"], st["tg"], st["il"], st["tl"], st["la"], ws, grad_loss=one, grad_log_probs=st["grad"])

    def theirs(i):
        st = sets[i]
        if not fused:
            return F.ctc_loss(st["lp"], st["tg_t"], st["il_t"], st["tl_t"])
        x = st["lp"].detach().requires_grad_(True)
        loss = F.ctc_loss(x, st["tg_t"], st["il_t"], st["tl_t"])
        return loss, torch.autograd.grad(loss, x)[0]

    ours(0)
    ref = theirs(0)
    err = C.rel_err(s0["out"].double(), (ref[0] if fused else ref).double())
    if fused:
        err = max(err, C.rel_err(s0["grad"].double(), ref[1].double()))
    tm = C.measure({"ours": C.GpuBench(ours, nsets), "torch": C.GpuBench(theirs, nsets)}, iters=args.iters,
                   passes=args.passes)
    moved = T * N * Cn * 4 * (2 if fused else 1)
    gb = moved / tm["ours"].median / 1e9
    key = f"ctc_loss {kind} f32 T{T} N{N} C{Cn} S{S} vs torch {path}"
    sku = plan.sku.layout + ("+" + bplan.sku.layout if fused else "")
    sets = None  # released; the closures above still name them
    C.free_memory()
    return dict(key=key, sku=sku, us=tm["ours"].median * 1e6, torch_us=tm["torch"].median * 1e6, gbs=gb,
                torch_gbs=moved / tm["torch"].median / 1e9, copy_frac=gb / copy_gbs,
                speedup=tm["torch"].median / tm["ours"].median, rel_err=err, ok=err <= 1e-3,
                timing={"ours": tm["ours"], "torch": tm["torch"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default="")
    ap.add_argument("--sweep", action="store_true", help="time the tuning variants (SWEEP)")
    args = ap.parse_args()
    args.iters, args.passes = (5, 1) if args.quick or args.sweep else (15, 2)
    info = C.device_info()
    copy = C.copy_bandwidth(iters=20 if args.quick else 50, passes=args.passes)
    if args.sweep:
        lines = sweep(args, copy["gbs"])
        head = f"{info['name']}, copy {copy['gbs']:.0f} GB/s, torch {info['torch']}"
        text = head + "\n" + "\n".join(lines)
        print(text)
        C.write_outputs("bench_loss_sweep", "# bench_loss --sweep\n\n```\n" + text + "\n```\n",
                        {"device": info, "copy": copy, "lines": lines}, text)
        return 0
    rows, failed = [], False
    for s in SHAPES:
        for kind in ("forward", "fused"):
            key = f"cross_entropy {kind} bf16 {s[0]}x{s[1]}"
            if not re.search(args.rows, key):
                continue
            try:
                r = run_row(kind, s, args, copy["gbs"])
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                r = dict(key=key, error=str(e), ok=False)
            failed = failed or not r["ok"]
            rows.append(r)
            print(key, "error" if "error" in r else f"{r['gbs']:.0f} GB/s, x{r['speedup']:.2f} torch", flush=True)
    for name, shape, dt, call in POINTWISE:
        key = f"{name} {str(dt).replace('torch.', '')} {shape[0]}x{shape[1]}"
        if not re.search(args.rows, key):
            continue
        try:
            r = run_pointwise(name, shape, dt, call, args, copy["gbs"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=key, error=str(e), ok=False)
        failed = failed or not r["ok"]
        rows.append(r)
        print(key, "error" if "error" in r else f"{r['gbs']:.0f} GB/s, x{r['speedup']:.2f} torch", flush=True)
    for name, kind, shape, dt in ROW_LOSSES:
        key = f"{name} {kind} {str(dt).replace('torch.', '')} {shape[0]}x{shape[1]}"
        if not re.search(args.rows, key):
            continue
        try:
            r = run_row_loss(name, kind, shape, dt, args, copy["gbs"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=key, error=str(e), ok=False)
        failed = failed or not r["ok"]
        rows.append(r)
        print(key, "error" if "error" in r else f"{r['gbs']:.0f} GB/s, x{r['speedup']:.2f} torch", flush=True)
    for kind, path in CTC_ROWS:
        key = f"ctc_loss {kind} f32 T500 N32 C64 S100 vs torch {path}"
        if not re.search(args.rows, key):
            continue
        try:
            r = run_ctc(kind, path, args, copy["gbs"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=key, error=str(e), ok=False)
        failed = failed or not r["ok"]
        rows.append(r)
        print(key, "error" if "error" in r else f"{r['us']:.0f} us, x{r['speedup']:.2f} torch", flush=True)
    headers = ["row", "kernel", "ours us", "torch us", "ours GB/s", "% copy", "torch GB/s", "x torch", "rel err", "ok"]
    table = [[r["key"], r.get("sku", "-"), C.fmt(r.get("us")), C.fmt(r.get("torch_us")), C.fmt(r.get("gbs"), ".0f"),
              C.fmt(100 * r["copy_frac"] if "copy_frac" in r else None, ".0f"), C.fmt(r.get("torch_gbs"), ".0f"),
              C.fmt(r.get("speedup"), ".2f"), C.fmt(r.get("rel_err"), ".1e"), "yes" if r["ok"] else "NO"]
             for r in rows]
    head = f"{info['name']}, copy {copy['gbs']:.0f} GB/s, torch {info['torch']}"
    text = head + "\n" + C.text_table(headers, table)
    print(text)
    C.write_outputs("bench_loss", "# bench_loss\n\n" + head + "\n\n" + C.markdown_table(headers, table),
                    {"device": info, "copy": copy, "rows": rows}, text)
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
