"""Runs one row op on one shape a few times, for a profiler (ncu / nsys) to look at.

    python3 tools/profile_one.py layer_norm bwd 2048x65536 [--reps 3]
    ncu --kernel-name regex:bwd_cluster --launch-skip 2 --launch-count 1 \
        python3 tools/profile_one.py layer_norm bwd 2048x65536

ops: rms_norm / layer_norm (kinds fwd, fwd+res, bwd), softmax / log_softmax (fwd, bwd). bf16,
fresh random data; the kernel geometry follows the same knobs as the benches
(BARACUDA_NORM_CFG / BARACUDA_NORM_BWD_CFG / BARACUDA_SOFTMAX_CFG).
"""
import argparse

import torch

import baracuda as bc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op")
    ap.add_argument("kind", choices=["fwd", "fwd+res", "bwd"])
    ap.add_argument("shape", help="ROWSxH")
    ap.add_argument("--reps", type=int, default=3)
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


if __name__ == "__main__":
    main()
