#!/usr/bin/env python3
"""Scan family: baracuda against torch, same shapes, same dtype, same work, same timer, same run.

    python3 bench/bench_scan.py            # full run: 100 samples x 2 interleaved passes per side
    python3 bench/bench_scan.py --quick    # smoke run: fewer samples, one pass
    python3 bench/bench_scan.py --rows 'cumsum/bf16'   # regex on the row keys (see --list)
    python3 bench/bench_scan.py --sweep    # time tuning variants (PlanPreference) on the key shapes
    OUT=/tmp/out python3 bench/bench_scan.py   # also $OUT/bench_scan.{md,json,txt}

Ours runs through the plan API (plan selected once, `plan.run(out, x, workspace=ws)` timed).
Bandwidth counts the input once plus the output (bytes read + bytes written) and is also given
as a fraction of the device-to-device copy bandwidth measured at the start of the run. A split
scan (few long rows, or few columns) reads its input twice; the % copy still counts it once.
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
# ||ours - ref64|| / ||ref64||, ref64 = the float64 scan of the same input: one rounding of the
# output plus the accumulation order (ours: parallel; both in f32 for bf16).
TOL = {torch.bfloat16: 1e-2, torch.float32: 1e-5}
TNAME = {torch.bfloat16: "bf16", torch.float32: "f32"}


@dataclass
class Case:
    key: str
    op: str
    shape: tuple
    dim: int
    dt: torch.dtype
    small: bool = False


def cases():
    out = []
    for dt in (torch.bfloat16, torch.float32):
        t = TNAME[dt]
        out.append(Case(f"cumsum/{t}/8192x4096", "cumsum", (8192, 4096), 1, dt))
        out.append(Case(f"cumsum/{t}/4x16Mi", "cumsum", (4, 1 << 24), 1, dt))
        out.append(Case(f"cumsum/{t}/1Mix64", "cumsum", (1 << 20, 64), 1, dt))
        out.append(Case(f"cumsum/{t}/4096x4096/axis0", "cumsum", (4096, 4096), 0, dt))
    out.append(Case("logcumsumexp/bf16/8192x4096", "logcumsumexp", (8192, 4096), 1, torch.bfloat16))
    out.append(Case("logcumsumexp/f32/8192x4096", "logcumsumexp", (8192, 4096), 1, torch.float32))
    out.append(Case("cummax/bf16/8192x4096", "cummax", (8192, 4096), 1, torch.bfloat16))
    return out


# Variants timed by --sweep: (label, tuning), per key shape.
SWEEPS = {
    "cumsum/bf16/8192x4096": ["", "pf=0", "threads=128", "group=16", "threads=128,group=16"],
    "cumsum/bf16/4x16Mi": ["", "pf=0", "split=0", "min_seg=16384", "min_seg=65536", "target=4224", "target=16896",
                           "threads=128"],
    "cumsum/f32/8192x4096": ["", "pf=0"],
    "cummax/bf16/8192x4096": ["", "pf=0"],
    "cumsum/bf16/1Mix64": ["", "group=4", "group=16", "threads=128"],
    "cumsum/bf16/4096x4096/axis0": ["", "cvec=0", "col_min_seg=8", "col_min_seg=64", "col_target=135168",
                                    "col_target=540672", "split=0", "threads=128"],
}


def torch_fn(op, x, dim, out):
    if op == "cumsum":
        return torch.cumsum(x, dim, out=out)
    if op == "logcumsumexp":
        return torch.logcumsumexp(x, dim)
    if op == "cummax":
        return torch.cummax(x, dim)
    raise KeyError(op)


def ref64(op, x, dim):
    if op == "cumsum":
        return torch.cumsum(x.double(), dim)
    if op == "logcumsumexp":
        return torch.logcumsumexp(x.double(), dim)
    raise KeyError(op)


def make_plan(c: Case, cfg=None):
    spec = bc.TensorSpec(c.shape, bc.dtype(c.dt))
    outs = [spec] + ([bc.TensorSpec(c.shape, bc.int64)] if c.op == "cummax" else [])
    return bc.ScanPlan.select(bc.ScanDescriptor(c.op, [spec], outs, c.dim), bc.PlanPreference(tuning=cfg or ""))


def run_case(c: Case, args, copy_gbs, cfg=None, with_torch=True):
    row = {"key": c.key, "op": c.op, "shape": "x".join(map(str, c.shape)), "dim": c.dim, "error": None, "cfg": cfg}
    try:
        def rnd():
            return torch.randn(c.shape, device=DEV, dtype=torch.float32).to(c.dt)

        x0 = rnd()
        in_bytes = C.nbytes(x0)
        out_bytes = in_bytes + (C.nbytes(x0) * 8 // x0.element_size() if c.op == "cummax" else 0)
        nsets = C.rotation_sets(in_bytes + out_bytes)
        xs = [x0] + [rnd() for _ in range(nsets - 1)]

        def new_outs():
            o = [torch.empty(c.shape, device=DEV, dtype=c.dt)]
            if c.op == "cummax":
                o.append(torch.empty(c.shape, device=DEV, dtype=torch.int64))
            return tuple(o)

        outs = [new_outs() for _ in range(nsets)]
        plan = make_plan(c, cfg)
        wsb = plan.workspace_bytes()
        ws = torch.empty(max(wsb, 1), device=DEV, dtype=torch.uint8)
        ws_arg = ws if wsb > 0 else None
        row.update(sku=plan.sku.name, layout=plan.sku.layout, workspace_bytes=wsb, nsets=nsets,
                   precision=plan.sku.precision.math)
        # Correctness: poisoned outputs, compared with a float64 scan (cummax: torch, exactly).
        worst = 0.0
        for i in range(min(nsets, 2)):
            for o in outs[i]:
                C.poison_(o)
            plan.run(outs[i], xs[i], workspace=ws_arg)
            if c.op == "cummax":
                tv, ti = torch.cummax(xs[i], c.dim)
                err = 0.0 if (torch.equal(outs[i][0], tv) and torch.equal(outs[i][1], ti)) else 1.0
            else:
                err = C.rel_err(outs[i][0], ref64(c.op, xs[i], c.dim))
            worst = max(worst, err if not math.isnan(err) else float("inf"))
        row["rel_err"] = worst
        row["ok"] = worst <= (0.0 if c.op == "cummax" else TOL[c.dt])

        ours = C.GpuBench(lambda i: plan.run(outs[i], xs[i], workspace=ws_arg), nsets, warmup=args.warmup)
        benches = {"ours": ours}
        if with_torch:
            tout = [new_outs() for _ in range(nsets)]
            benches["torch"] = C.GpuBench(
                lambda i: torch_fn(c.op, xs[i], c.dim, tout[i][0] if c.op == "cumsum" else None), nsets,
                warmup=args.warmup)
        t = C.measure(benches, iters=args.iters, passes=args.passes)
        moved = in_bytes + out_bytes
        row["ours"] = t["ours"]
        row["ours_gbs"] = moved / t["ours"].median / 1e9
        row["ours_copy_frac"] = row["ours_gbs"] / copy_gbs
        row["method"] = t["ours"].method
        if with_torch:
            row["torch"] = t["torch"]
            row["torch_gbs"] = moved / t["torch"].median / 1e9
            row["torch_copy_frac"] = row["torch_gbs"] / copy_gbs
            row["speedup"] = t["torch"].median / t["ours"].median
        xs = outs = ws = None  # released; the closures above still name them
        benches.clear()
        C.free_memory()
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()
        row["ok"] = False
    return row


def sweep(args, copy_gbs, selected):
    results = []
    by_key = {c.key: c for c in cases()}
    for key, cfgs in SWEEPS.items():
        if selected is not None and key not in selected:
            continue
        c = by_key[key]
        best = None
        for cfg in cfgs:
            r = run_case(c, args, copy_gbs, cfg=cfg, with_torch=False)
            results.append(r)
            if r["error"]:
                print(f"  {key:<30} cfg={cfg!r:<28} ERROR {r['error']}", flush=True)
                continue
            print(f"  {key:<30} cfg={cfg!r:<28} {r['ours'].median * 1e6:9.1f} us  "
                  f"{100 * r['ours_copy_frac']:5.1f}% copy  {'ok' if r['ok'] else 'FAILED'}  {r['sku']}", flush=True)
            if r["ok"] and (best is None or r["ours_copy_frac"] > best["ours_copy_frac"]):
                best = r
        if best is not None:
            print(f"  best for {key}: cfg={best['cfg']!r} ({100 * best['ours_copy_frac']:.1f}% copy)", flush=True)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 samples, one pass")
    ap.add_argument("--sweep", action="store_true", help="time tuning variants (PlanPreference) on the key shapes")
    ap.add_argument("--rows", default=None, help="regex (case-insensitive) on row keys; see --list")
    ap.add_argument("--list", action="store_true", help="print the row keys and exit")
    ap.add_argument("--iters", type=int, default=None, help="samples per pass (default 100, quick 20)")
    ap.add_argument("--passes", type=int, default=None, help="interleaved passes (default 2, quick 1)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up calls (default 10, quick 3)")
    ap.add_argument("--seed", type=int, default=None, help="torch seed (default: from os.urandom, printed)")
    args = ap.parse_args(argv)
    args.iters = args.iters or (20 if args.quick or args.sweep else 100)
    args.passes = args.passes or (1 if args.quick or args.sweep else 2)
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick or args.sweep else 10)

    all_cases = cases()
    if args.list:
        for c in all_cases:
            print(c.key)
        return 0
    pat = re.compile(args.rows, re.I) if args.rows else None
    selected = [c for c in all_cases if pat is None or pat.search(c.key)]
    if not torch.cuda.is_available():
        print("bench_scan: torch sees no CUDA device", file=sys.stderr)
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
        res = sweep(args, copy_gbs, None if pat is None else {c.key for c in selected})
        C.write_outputs("bench_scan_sweep", "# bench_scan --sweep\n", {"copy_gbs": copy_gbs, "rows": res})
        return 3 if any(not r.get("ok") for r in res) else 0

    rows = []
    t0 = time.perf_counter()
    for c in selected:
        r = run_case(c, args, copy_gbs)
        rows.append(r)
        if r["error"]:
            print(f"  {c.key:<32} ERROR {r['error']}", flush=True)
        else:
            print(f"  {c.key:<32} ours {r['ours_gbs']:6.0f} GB/s {100 * r['ours_copy_frac']:5.1f}%  torch "
                  f"{r['torch_gbs']:6.0f} GB/s {100 * r['torch_copy_frac']:5.1f}%  x{r['speedup']:.2f}  "
                  f"{'ok' if r['ok'] else 'FAILED'} (rel {r['rel_err']:.1e})  {r['sku']}", flush=True)
    elapsed = time.perf_counter() - t0

    return C.report_bandwidth_rows("bench_scan", rows, info=info, copy_gbs=copy_gbs, seed=seed, elapsed=elapsed,
                                   version=bc.__version__)

if __name__ == "__main__":
    sys.exit(main())
