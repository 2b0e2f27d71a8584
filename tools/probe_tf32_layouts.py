#!/usr/bin/env python3
"""tf32 GEMM by operand layout: is the gap to torch (0.52-0.59x at 8192^3) a layout question?

Hopper's warpgroup MMA takes 32-bit operands only K-major, so cuBLASLt's sm_90 tf32 kernels may be
unavailable when an operand is MN-major (a row-major B [K, N]); its heuristic then offers one older
kernel family (what bench_gemm --sweep-algos saw). This times bc.matmul(allow_tf32=True) at M = N =
K = `--n` for the four layouts of A and B (row-major, or a column-major view: the transposed
contiguous tensor transposed back) next to torch's matmul in tf32 on the same tensors, in one run,
and prints each plan's SKU (the algorithm cuBLASLt picked).

    python3 tools/probe_tf32_layouts.py [--n 8192]

Also printed: the kernel each side launches (torch.profiler), cuBLASLt's first `--candidates` heuristic candidates
for the row-major x row-major case (prefer=[cublaslt]: the plan's default there is cuBLAS), and that case run as a copy of B into column-major + the
column-major GEMM (what a transposing fallback would cost).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import common as C  # noqa: E402
import baracuda as bc  # noqa: E402


def kernel_names(fn):
    """The CUDA kernels one call of fn launches (names cut to 90 characters)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.key[:90] for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--candidates", type=int, default=8, help="cuBLASLt heuristic candidates to time (row x row)")
    args = ap.parse_args()
    n = args.n
    print(C.device_info())
    g = torch.Generator(device="cuda").manual_seed(0)
    a0 = torch.randn(n, n, device="cuda", generator=g)
    b0 = torch.randn(n, n, device="cuda", generator=g)
    flops = 2.0 * n ** 3
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        for a_col in (False, True):
            for b_col in (False, True):
                a = a0.t().contiguous().t() if a_col else a0
                b = b0.t().contiguous().t() if b_col else b0
                out = torch.empty(n, n, device="cuda")
                spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.float32, tuple(t.stride()))  # noqa: E731
                plan = bc.GemmPlan.select(bc.GemmDescriptor(spec(a), spec(b), spec(out)),
                                          bc.PlanPreference(allow_tf32=True))
                tm = C.measure({"ours": C.GpuBench(lambda i: bc.matmul(a, b, out=out, allow_tf32=True), 1),
                                "torch": C.GpuBench(lambda i: torch.matmul(a, b), 1)}, iters=10, passes=2)
                ours, ref = flops / tm["ours"].median / 1e12, flops / tm["torch"].median / 1e12
                err = (out - torch.matmul(a, b)).abs().max().item()
                print(f"A {'col' if a_col else 'row'}-major, B {'col' if b_col else 'row'}-major: ours {ours:.0f} "
                      f"TFLOP/s, torch {ref:.0f} ({ours / ref:.2f}x), max |diff| {err:.2e} [{plan.sku.name}]",
                      flush=True)
                print(f"    ours:  {kernel_names(lambda: bc.matmul(a, b, out=out, allow_tf32=True))}")
                print(f"    torch: {kernel_names(lambda: torch.matmul(a, b))}", flush=True)
        a, b = a0, b0
        out = torch.empty(n, n, device="cuda")
        spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.float32, tuple(t.stride()))  # noqa: E731
        for idx in range(args.candidates):
            try:
                plan = bc.GemmPlan.select(bc.GemmDescriptor(spec(a), spec(b), spec(out)),
                                          bc.PlanPreference(allow_tf32=True, prefer=[bc.Backend.cublaslt],
                                                            tuning=f"algo={idx}"))
                ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device="cuda")
                tm = C.measure({"x": C.GpuBench(lambda i: plan.run(out, a, b, workspace=ws), 1)}, iters=10, passes=1)
                print(f"row x row candidate {idx}: {flops / tm['x'].median / 1e12:.0f} TFLOP/s [{plan.sku.name}] "
                      f"{kernel_names(lambda: plan.run(out, a, b, workspace=ws))[-1][:60]}")
            except Exception as e:  # noqa: BLE001
                print(f"row x row candidate {idx}: {type(e).__name__}: {str(e)[:100]}")
        bt = torch.empty_strided((n, n), (1, n), device="cuda")
        tm = C.measure({"x": C.GpuBench(lambda i: (bt.copy_(b), bc.matmul(a, bt, out=out, allow_tf32=True)), 1)},
                       iters=10, passes=1)
        print(f"row x row as copy B -> col-major + GEMM: {flops / tm['x'].median / 1e12:.0f} TFLOP/s", flush=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


if __name__ == "__main__":
    main()
