#!/usr/bin/env python3
"""Reduction family: baracuda against torch, same shapes, same dtype, same work, same timer, same run.

    python3 bench/bench_reduction.py            # full run: 100 samples x 2 interleaved passes per side
    python3 bench/bench_reduction.py --quick    # smoke run: fewer samples, one pass
    python3 bench/bench_reduction.py --rows 'sum'   # regex on the row keys (see --list)
    OUT=/tmp/out python3 bench/bench_reduction.py   # also $OUT/bench_reduction.{md,json,txt}
    python3 bench/bench_reduction.py --sweep    # time the tuning variants (PlanPreference(tuning=...))
                                                # on the key shapes, print the best per shape

Ours runs through the plan API (plan selected once, `plan.run(out, x, workspace=ws)` timed).
Bandwidth counts the input once plus the output (bytes read + bytes written) and is also given
as a fraction of the device-to-device copy bandwidth measured at the start of the run. Targets
(H200, bf16, >= 256 MiB): row sum / amax / mean >= 85% of copy, leading-axis sum >= 75%.
Exit status 3 if any row failed its correctness check. Method: docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
BF = torch.bfloat16
# ||ours - torch|| / ||torch||: both accumulate in f32 and round once to bf16 (orders differ).
TOL = {"sum": 1e-2, "mean": 1e-2, "amax": 0.0, "amin": 0.0, "var": 2e-2, "logsumexp": 1e-2, "argmax": 0.0,
       "argmin": 0.0}


@dataclass
class Case:
    key: str
    op: str
    shape: tuple
    dim: object              # int or None (all)
    target: float = None     # fraction of copy bandwidth the row should reach (None: no target)
    small: bool = False      # time as CUDA-graph replays of a batch


def cases():
    out = []
    for shape in ((32768, 4096), (8192, 16384)):
        for op in ("sum", "amax", "mean"):
            out.append(Case(f"row/{op}/bf16/{shape[0]}x{shape[1]}", op, shape, 1, target=0.85))
    for n in (64, 512):
        for op in ("sum", "amax"):
            out.append(Case(f"short/{op}/bf16/{1 << 20}x{n}", op, (1 << 20, n), 1))
    for op in ("argmax", "argmin"):
        out.append(Case(f"short/{op}/bf16/{1 << 20}x64", op, (1 << 20, 64), 1))
    out.append(Case("long/sum/bf16/262144", "sum", (262144,), None, small=True))
    out.append(Case("long/sum/bf16/1x256Mi", "sum", (1 << 28,), None))
    out.append(Case("lead/sum/bf16/16384x8192/axis0", "sum", (16384, 8192), 0, target=0.75))
    out.append(Case("lead/amax/bf16/16384x8192/axis0", "amax", (16384, 8192), 0, target=0.75))
    out.append(Case("row/var/bf16/8192x16384", "var", (8192, 16384), 1))
    out.append(Case("row/logsumexp/bf16/8192x16384", "logsumexp", (8192, 16384), 1))
    out.append(Case("row/argmax/bf16/8192x16384", "argmax", (8192, 16384), 1))
    # The min direction has kernels of its own: a fold of both into one kernel slowed these paths.
    out.append(Case("row/amin/bf16/8192x16384", "amin", (8192, 16384), 1, target=0.85))
    out.append(Case("row/argmin/bf16/8192x16384", "argmin", (8192, 16384), 1))
    return out


def torch_fn(op, x, dim, out):
    if op == "sum":
        return torch.sum(x, dim, out=out) if dim is not None else torch.sum(x)
    if op == "mean":
        return torch.mean(x, dim, out=out)
    if op == "amax":
        return torch.amax(x, dim, out=out) if dim is not None else torch.amax(x)
    if op == "amin":
        return torch.amin(x, dim, out=out) if dim is not None else torch.amin(x)
    if op == "var":
        return torch.var(x, dim)
    if op == "logsumexp":
        return torch.logsumexp(x, dim)
    if op == "argmax":
        return torch.argmax(x, dim)
    if op == "argmin":
        return torch.argmin(x, dim)
    raise KeyError(op)


def run_case(c: Case, args, copy_gbs):
    row = {"key": c.key, "op": c.op, "shape": "x".join(map(str, c.shape)), "dim": c.dim, "error": None}
    try:
        dt_out = torch.int64 if c.op in ("argmax", "argmin") else BF
        axes = [] if c.dim is None else [c.dim]
        oshape = tuple(s for i, s in enumerate(c.shape) if c.dim is not None and i != c.dim % len(c.shape))
        # A positive mean keeps long sums far from 0, so the relative check measures rounding only.
        shift = 0.5 if c.op in ("sum", "mean") else 0.0

        def rnd():
            return (torch.randn(c.shape, device=DEV, dtype=torch.float32) + shift).to(BF)

        x0 = rnd()
        in_bytes = C.nbytes(x0)
        nsets = C.rotation_sets(in_bytes)
        xs = [x0] + [rnd() for _ in range(nsets - 1)]
        outs = [torch.empty(oshape, device=DEV, dtype=dt_out) for _ in range(nsets)]
        desc = bc.ReductionDescriptor(c.op, bc.TensorSpec(c.shape, bc.bfloat16), bc.TensorSpec(oshape, bc.dtype(dt_out)),
                                      axes)
        plan = bc.ReductionPlan.select(desc)
        wsb = plan.workspace_bytes()
        ws = torch.empty(max(wsb, 1), device=DEV, dtype=torch.uint8)
        ws_arg = ws if wsb > 0 else None
        row.update(sku=plan.sku.name, layout=plan.sku.layout, workspace_bytes=wsb, nsets=nsets,
                   precision=plan.sku.precision.math)
        # Correctness: poisoned outputs, every set compared with torch.
        worst = 0.0
        for i in range(min(nsets, 3)):
            C.poison_(outs[i])
            plan.run(outs[i], xs[i], workspace=ws_arg)
            ref = torch_fn(c.op, xs[i], c.dim, None)
            if c.op in ("argmax", "argmin"):
                err = float((outs[i] != ref).float().mean().item())
            else:
                err = C.rel_err(outs[i], ref)
            worst = max(worst, err if not math.isnan(err) else float("inf"))
        row["rel_err"] = worst
        row["ok"] = worst <= TOL[c.op]

        inner = 20 if c.small else 1
        ours = C.GpuBench(lambda i: plan.run(outs[i], xs[i], workspace=ws_arg), nsets, inner=inner, graph=c.small,
                          warmup=args.warmup)
        tout = [torch.empty(oshape, device=DEV, dtype=dt_out) for _ in range(nsets)]
        use_out = c.op in ("sum", "mean", "amax", "amin") and c.dim is not None
        theirs = C.GpuBench(lambda i: torch_fn(c.op, xs[i], c.dim, tout[i] if use_out else None), nsets, inner=inner,
                            graph=c.small, warmup=args.warmup)
        t = C.measure({"ours": ours, "torch": theirs}, iters=args.iters, passes=args.passes)
        moved = in_bytes + C.nbytes(outs[0])
        row["ours"] = t["ours"]
        row["torch"] = t["torch"]
        row["ours_gbs"] = moved / t["ours"].median / 1e9
        row["torch_gbs"] = moved / t["torch"].median / 1e9
        row["ours_copy_frac"] = row["ours_gbs"] / copy_gbs
        row["torch_copy_frac"] = row["torch_gbs"] / copy_gbs
        row["speedup"] = t["torch"].median / t["ours"].median
        row["method"] = t["ours"].method
        row["target"] = c.target
        row["meets_target"] = None if c.target is None else row["ours_copy_frac"] >= c.target
        xs = outs = tout = ws = None  # released; the closures above still name them
        C.free_memory()
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()
        row["ok"] = False
    return row


# --sweep: (row key, op, shape, dim, [PlanPreference tuning variants]); "" is the default choice.
SWEEP = [
    ("row/sum/bf16/32768x4096", "sum", (32768, 4096), 1, ["", "warp_max=256"]),
    ("row/sum/bf16/8192x16384", "sum", (8192, 16384), 1, ["", "warp_max=4096"]),
    ("row/logsumexp/bf16/8192x16384", "logsumexp", (8192, 16384), 1, ["", "warp_max=4096"]),
    ("short/sum/bf16/1048576x512", "sum", (1 << 20, 512), 1, ["", "short_max=0"]),
    ("short/sum/bf16/1048576x64", "sum", (1 << 20, 64), 1, ["", "short_max=0"]),
    ("long/sum/bf16/1x256Mi", "sum", (1 << 28,), None,
     ["", "split_blocks=1024", "split_blocks=2048", "split_blocks=8192", "split_blocks=16384",
      "split_blocks=16384,split_min=4096"]),
    ("lead/sum/bf16/16384x8192/axis0", "sum", (16384, 8192), 0,
     ["", "col_wy=1", "col_wy=2", "col_wy=8", "col_blocks=512", "col_blocks=2048", "col_blocks=4096",
      "col_rows=32", "col_rows=128", "col_wy=2,col_blocks=2048", "col_wy=8,col_blocks=2048", "col_wy=1,col_rows=16"]),
    ("lead/amax/bf16/16384x8192/axis0", "amax", (16384, 8192), 0, ["", "col_wy=1", "col_wy=2", "col_wy=8",
                                                                    "col_blocks=2048"]),
]


def sweep(args, copy_gbs) -> int:
    """Times every variant of SWEEP on the same data (ours only) and prints the best per row."""
    failed = False
    summary = []
    for key, op, shape, dim, cfgs in SWEEP:
        if args.rows and not re.search(args.rows, key, re.I):
            continue
        shift = 0.5 if op in ("sum", "mean") else 0.0
        x0 = (torch.randn(shape, device=DEV, dtype=torch.float32) + shift).to(BF)
        nsets = C.rotation_sets(C.nbytes(x0))
        xs = [x0] + [(torch.randn(shape, device=DEV, dtype=torch.float32) + shift).to(BF) for _ in range(nsets - 1)]
        oshape = tuple(s for i, s in enumerate(shape) if dim is not None and i != dim % len(shape))
        outs = [torch.empty(oshape, device=DEV, dtype=BF) for _ in range(nsets)]
        ref = torch_fn(op, xs[0], dim, None)
        moved = C.nbytes(x0) + C.nbytes(outs[0])
        results = []
        for cfg in cfgs:
            desc = bc.ReductionDescriptor(op, bc.TensorSpec(shape, bc.bfloat16), bc.TensorSpec(oshape, bc.bfloat16),
                                          [] if dim is None else [dim])
            plan = bc.ReductionPlan.select(desc, bc.PlanPreference(tuning=cfg))
            wsb = plan.workspace_bytes()
            ws = torch.empty(max(wsb, 1), device=DEV, dtype=torch.uint8) if wsb else None
            C.poison_(outs[0])
            plan.run(outs[0], xs[0], workspace=ws)
            err = C.rel_err(outs[0], ref)
            ok = not math.isnan(err) and err <= TOL[op]
            failed |= not ok
            bench = C.GpuBench(lambda i: plan.run(outs[i], xs[i], workspace=ws), nsets, warmup=args.warmup)
            t = C.measure({"ours": bench}, iters=args.iters, passes=args.passes)["ours"].median
            gbs = moved / t / 1e9
            results.append((gbs, cfg or "(default)", plan.sku.name, wsb, ok))
            print(f"  sweep {key:<34} {cfg or '(default)':<36} {gbs:6.0f} GB/s {100 * gbs / copy_gbs:5.1f}%  "
                  f"{plan.sku.name}  ws {wsb}  {'ok' if ok else 'FAILED'}", flush=True)
        best = max(results)
        default = results[0]
        summary.append((key, best, default))
        xs = outs = None  # released; the closures above still name them
        C.free_memory()
    print("\nbest per row (GB/s, % copy; default for comparison):")
    for key, best, default in summary:
        print(f"  {key:<34} best {best[1]:<36} {best[0]:6.0f} GB/s {100 * best[0] / copy_gbs:5.1f}%   default "
              f"{default[0]:6.0f} GB/s {100 * default[0] / copy_gbs:5.1f}%  ({best[2]})")
    return 3 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 samples, one pass")
    ap.add_argument("--rows", default=None, help="regex (case-insensitive) on row keys; see --list")
    ap.add_argument("--list", action="store_true", help="print the row keys and exit")
    ap.add_argument("--iters", type=int, default=None, help="samples per pass (default 100, quick 20)")
    ap.add_argument("--passes", type=int, default=None, help="interleaved passes (default 2, quick 1)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up calls (default 10, quick 3)")
    ap.add_argument("--seed", type=int, default=None, help="torch seed (default: from os.urandom, printed)")
    ap.add_argument("--sweep", action="store_true",
                    help="time the tuning variants (PlanPreference tuning) on the key shapes (ours only; --rows filters) "
                         "and exit")
    args = ap.parse_args(argv)
    if args.sweep and args.iters is None:
        args.iters = 30
    args.iters = args.iters or (20 if args.quick else 100)
    args.passes = args.passes or (1 if args.quick else 2)
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 10)

    all_cases = cases()
    if args.list:
        for c in all_cases:
            print(c.key)
        return 0
    pat = re.compile(args.rows, re.I) if args.rows else None
    selected = [c for c in all_cases if pat is None or pat.search(c.key)]
    if not torch.cuda.is_available():
        print("bench_reduction: torch sees no CUDA device", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    info = C.device_info()
    binfo = bc.build_info()
    print(f"GPU: {info['name']} ({info['multiprocessors']} SMs, L2 {info['l2_bytes'] / C.MiB:.0f} MiB); torch "
          f"{info['torch']}; baracuda {bc.__version__} (archs {binfo['cuda_archs']}); seed {seed}; iters "
          f"{args.iters} x {args.passes}", flush=True)
    copy = C.copy_bandwidth(512 * C.MiB, iters=args.iters, passes=args.passes, warmup=args.warmup)
    copy_gbs = copy["gbs"]
    print(f"device copy (torch copy_, 512 MiB, read + write): {copy_gbs:.0f} GB/s", flush=True)
    if args.sweep:
        return sweep(args, copy_gbs)

    rows = []
    t0 = time.perf_counter()
    for c in selected:
        r = run_case(c, args, copy_gbs)
        rows.append(r)
        if r["error"]:
            print(f"  {c.key:<36} ERROR {r['error']}", flush=True)
        else:
            tgt = "" if r["target"] is None else f" (target {100 * r['target']:.0f}%: " \
                                                  f"{'met' if r['meets_target'] else 'MISSED'})"
            print(f"  {c.key:<36} ours {r['ours_gbs']:6.0f} GB/s {100 * r['ours_copy_frac']:5.1f}%  torch "
                  f"{r['torch_gbs']:6.0f} GB/s {100 * r['torch_copy_frac']:5.1f}%  x{r['speedup']:.2f}  "
                  f"{'ok' if r['ok'] else 'FAILED'} (rel {r['rel_err']:.1e})  {r['sku']}{tgt}", flush=True)
    elapsed = time.perf_counter() - t0

    return C.report_bandwidth_rows("bench_reduction", rows, info=info, copy_gbs=copy_gbs, seed=seed, elapsed=elapsed,
                                   version=bc.__version__)

if __name__ == "__main__":
    sys.exit(main())
