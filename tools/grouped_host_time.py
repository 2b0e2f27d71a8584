#!/usr/bin/env python3
"""Host time per GroupedGemmPlan.run on the sm90 (CUTLASS) kernel, device offsets and host group
sizes, next to a plain GemmPlan.run (cuBLASLt) of the same total rows: the launch path's own cost,
on shapes small enough that the GPU keeps up with the host.

    python3 tools/grouped_host_time.py [--experts 8] [--reps 3000]
"""
import argparse
import time

import torch

import baracuda as bc

DEV = "cuda"


def host_us(fn, reps):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / reps * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3000)
    a = ap.parse_args()
    e, t, n, k = a.experts, 16 * a.experts, 256, 256
    bf = torch.bfloat16
    x = torch.randn(t, k, device=DEV, dtype=bf)
    w = torch.randn(e, n, k, device=DEV, dtype=bf)
    out = torch.empty(t, n, device=DEV, dtype=bf)
    offs = torch.arange(0, t + 1, 16, device=DEV, dtype=torch.int32)
    spec = lambda tt: bc.TensorSpec(tuple(tt.shape), bc.dtype(tt.dtype), tuple(tt.stride()))  # noqa: E731
    dev_plan = bc.GroupedGemmPlan.select(bc.GroupedGemmDescriptor(spec(x), spec(w), spec(out),
                                                                  offsets_dtype=bc.int32),
                                         bc.PlanPreference(tuning="kernel=sm90"))
    host_plan = bc.GroupedGemmPlan.select(bc.GroupedGemmDescriptor(spec(x), spec(w), spec(out),
                                                                   group_sizes=[16] * e))
    wt = w[0].t()
    gemm = bc.GemmPlan.select(bc.GemmDescriptor(spec(x), spec(wt), spec(out)))
    ws = torch.empty(max(dev_plan.workspace_bytes(), host_plan.workspace_bytes(), gemm.workspace_bytes(), 1),
                     device=DEV, dtype=torch.uint8)
    rows = {
        f"grouped offsets ({dev_plan.sku.name})": lambda: dev_plan.run(out, x, w, offsets=offs, workspace=ws),
        f"grouped host sizes ({host_plan.sku.name})": lambda: host_plan.run(out, x, w, workspace=ws),
        f"one GEMM ({gemm.sku.name})": lambda: gemm.run(out, x, wt, workspace=ws),
    }
    for name, fn in rows.items():
        print(f"{host_us(fn, a.reps):7.2f} us host per run  {name}")


if __name__ == "__main__":
    main()
