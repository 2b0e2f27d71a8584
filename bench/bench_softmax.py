#!/usr/bin/env python3
"""Softmax family: baracuda against torch, same shapes, same dtype, same work, same timer, same run.

    python3 bench/bench_softmax.py            # full run
    python3 bench/bench_softmax.py --quick    # fewer samples, one pass
    python3 bench/bench_softmax.py --rows 'log_softmax'   # regex on the row keys
    python3 bench/bench_softmax.py --sweep    # time the tuning variants (PlanPreference) on the key shapes
                                              # (a -DBARACUDA_SWEEP_KERNELS=ON build holds every variant;
                                              # others print the variants they leave out as errors)
    OUT=/tmp/out python3 bench/bench_softmax.py   # also $OUT/bench_softmax.{md,json,txt}

Ours runs through the plan API (selected once, `plan.run(out, *inputs)` timed). Bandwidth counts
each operand once (forward: x read + y written; backward: grad_out + y read, grad_x written), also
as a fraction of the device-to-device copy bandwidth measured at the start of the run. Cross-entropy
rows are in bench_loss.py.

gumbel_softmax rows time torch.nn.functional.gumbel_softmax (its own noise; our error is measured
against a float64 softmax of the logits plus our noise, baracuda.gumbel_noise). sparsemax rows time a
torch reference written with sort + cumsum (torch has no sparsemax), computed in f32.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
BF = torch.bfloat16
aten = torch.ops.aten
SHAPES = [(32768, 4096), (4096, 32768), (1048576, 64), (262144, 512), (512, 262144)]
ROWOP_SHAPES = [(32768, 4096), (4096, 32768), (262144, 512), (512, 262144)]
ROWOPS = ["gumbel_softmax", "gumbel_softmax_hard", "gumbel_softmax_backward", "sparsemax", "sparsemax_backward"]
TOL = 2e-2


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), [int(s) for s in t.stride()])


def torch_fn(op):
    if op == "softmax":
        return lambda x: torch.softmax(x, -1)
    if op == "log_softmax":
        return lambda x: torch.log_softmax(x, -1)
    if op == "softmax_backward":
        return lambda gy, y: aten._softmax_backward_data(gy, y, -1, y.dtype)
    return lambda gy, y: aten._log_softmax_backward_data(gy, y, -1, y.dtype)


def run_row(op, shape, args, copy_gbs):
    bwd = op.endswith("_backward")
    nin = 2 if bwd else 1
    set_bytes = (nin + 1) * shape[0] * shape[1] * 2
    nsets = C.rotation_sets(set_bytes)
    sets = []
    for _ in range(nsets):
        x = torch.randn(shape, device=DEV, dtype=BF) * 3
        if bwd:
            fwd = torch.softmax if op == "softmax_backward" else torch.log_softmax
            ins = [torch.randn(shape, device=DEV, dtype=BF), fwd(x, -1)]
        else:
            ins = [x]
        sets.append((ins, torch.empty(shape, device=DEV, dtype=BF)))
    ins0, out0 = sets[0]
    plan = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor(op, [spec(t) for t in ins0], -1, spec(out0)))
    tf = torch_fn(op)
    C.poison_(out0)
    plan.run(out0, *ins0)
    err = C.rel_err(out0, tf(*ins0))
    ok = err <= TOL
    ours = C.GpuBench(lambda i: plan.run(sets[i][1], *sets[i][0]), nsets)
    theirs = C.GpuBench(lambda i: tf(*sets[i][0]), nsets)
    t = C.measure({"ours": ours, "torch": theirs}, iters=args.iters, passes=args.passes)
    moved = set_bytes
    g_ours, g_torch = moved / t["ours"].median / 1e9, moved / t["torch"].median / 1e9
    sets = None  # released; the closures above still name them
    C.free_memory()
    return dict(key=f"{op} bf16 {shape[0]}x{shape[1]}", sku=plan.sku.layout, us=t["ours"].median * 1e6,
                torch_us=t["torch"].median * 1e6, gbs=g_ours, torch_gbs=g_torch, copy_frac=g_ours / copy_gbs,
                speedup=t["torch"].median / t["ours"].median, rel_err=err, ok=ok,
                timing={"ours": t["ours"], "torch": t["torch"]})


def torch_sparsemax(x):
    """sparsemax along the last dim with sort + cumsum, in f32 (the usual torch implementation)."""
    z = x.float()
    z = z - z.amax(-1, keepdim=True)
    zs = torch.sort(z, dim=-1, descending=True).values
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    css = zs.cumsum(-1)
    kz = (1 + k * zs > css).sum(-1, keepdim=True)
    t = (css.gather(-1, kz - 1) - 1) / kz
    return torch.clamp(z - t, min=0).to(x.dtype)


def torch_sparsemax_backward(gy, y):
    s = (y > 0).float()
    g = gy.float()
    return (s * (g - (g * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True))).to(gy.dtype)


def run_rowop_row(op, shape, args, copy_gbs):
    """gumbel_softmax (soft / hard), its backward, sparsemax and its backward, bf16, last dim."""
    F = torch.nn.functional
    tau = 0.5
    hard = op == "gumbel_softmax_hard"
    base = "gumbel_softmax" if hard else op
    bwd = op.endswith("_backward")
    nin = 2 if bwd else 1
    set_bytes = (nin + 1) * shape[0] * shape[1] * 2
    nsets = C.rotation_sets(set_bytes)
    sets = []
    for _ in range(nsets):
        x = torch.randn(shape, device=DEV, dtype=BF) * 3
        if op == "gumbel_softmax_backward":
            ins = [torch.randn(shape, device=DEV, dtype=BF), torch.softmax(x, -1)]
        elif op == "sparsemax_backward":
            ins = [torch.randn(shape, device=DEV, dtype=BF), bc.sparsemax(x)]
        else:
            ins = [x]
        sets.append((ins, torch.empty(shape, device=DEV, dtype=BF)))
    ins0, out0 = sets[0]
    d = bc.SoftmaxDescriptor(base, [spec(t) for t in ins0], -1, spec(out0),
                             tau=tau if base.startswith("gumbel") else 1.0, hard=hard)
    plan = bc.SoftmaxPlan.select(d)
    C.poison_(out0)
    plan.run(out0, *ins0, seed=1, offset=0)
    if base == "gumbel_softmax":
        x = ins0[0]
        soft = torch.softmax((x.double() + bc.gumbel_noise(x, seed=1, offset=0).double()) / tau, -1)
        ref = F.one_hot(soft.to(BF).argmax(-1), shape[1]).to(BF) if hard else soft.to(BF)
        tf = lambda x: F.gumbel_softmax(x, tau=tau, hard=hard)  # noqa: E731
    elif op == "gumbel_softmax_backward":
        ref = aten._softmax_backward_data(ins0[0].double(), ins0[1].double(), -1, torch.float64) / tau
        tf = lambda gy, y: aten._softmax_backward_data(gy, y, -1, y.dtype) / tau  # noqa: E731
    elif op == "sparsemax":
        ref = torch_sparsemax(ins0[0].double())
        tf = torch_sparsemax
    else:
        ref = torch_sparsemax_backward(ins0[0].double(), ins0[1].double())
        tf = torch_sparsemax_backward
    err = C.rel_err(out0, ref)
    ok = err <= TOL
    ours = C.GpuBench(lambda i: plan.run(sets[i][1], *sets[i][0], seed=1, offset=i), nsets)
    theirs = C.GpuBench(lambda i: tf(*sets[i][0]), nsets)
    t = C.measure({"ours": ours, "torch": theirs}, iters=args.iters, passes=args.passes)
    g_ours, g_torch = set_bytes / t["ours"].median / 1e9, set_bytes / t["torch"].median / 1e9
    sets = None  # released; the closures above still name them
    C.free_memory()
    return dict(key=f"{op} bf16 {shape[0]}x{shape[1]}", sku=plan.sku.layout, us=t["ours"].median * 1e6,
                torch_us=t["torch"].median * 1e6, gbs=g_ours, torch_gbs=g_torch, copy_frac=g_ours / copy_gbs,
                speedup=t["torch"].median / t["ours"].median, rel_err=err, ok=ok,
                timing={"ours": t["ours"], "torch": t["torch"]})


# --sweep: kernel geometries (PlanPreference tuning, read by SoftmaxPlan.select) per key shape.
# "" is the default choice; variants a shape cannot use fall back to it (the sku column says).
SWEEP = {
    # exact=1: the 16-bit forward's exp(x - max) in the exact form (not folded to one FFMA).
    (32768, 4096): {"fwd": ["", "exact=1", "w=1,k=16", "w=2,k=8", "w=4,k=4", "w=2,k=8,stage=1", "w=4,k=4,stage=1",
                            "w=1,k=16,stage=1", "path=online"],
                    "bwd": ["", "w=2,k=8", "w=4,k=4", "w=1,k=8,stage=1", "w=2,k=8,stage=1", "w=4,k=4,stage=1",
                            "w=1,k=16,stage=1", "path=online"]},
    (4096, 32768): {"fwd": ["", "exact=1", "w=16,k=8,stage=0", "w=16,k=8,stage=1", "w=32,k=4,stage=0", "w=32,k=4,stage=1",
                            "w=8,k=16,stage=1", "w=8,k=8,cs=2,stage=1", "w=8,k=8,cs=2,stage=0", "path=online"],
                    "bwd": ["", "w=16,k=8,stage=1", "w=32,k=4,stage=0", "w=32,k=4,stage=1", "w=8,k=8,cs=2,stage=1",
                            "w=8,k=8,cs=2,stage=0", "w=16,k=8,cs=2,stage=1", "path=online"]},
    (512, 262144): {"fwd": ["", "exact=1", "w=16,k=8,cs=8,stage=0", "w=16,k=8,cs=8,stage=1", "w=16,k=8,cs=8,stage=2",
                            "w=16,k=8,cs=8,stage=3", "path=online"],
                    "bwd": ["", "w=16,k=8,cs=8,stage=0", "w=16,k=8,cs=8,stage=1", "path=online"]},
    # rpg: rows_warp rows per lane group (the default: 4 at one chunk per lane, else 1)
    (262144, 512): {"fwd": ["", "rpg=2", "exact=1", "path=block,w=1,k=4", "path=block,w=1,k=4,stage=1"],
                    "bwd": ["", "path=block,w=1,k=4", "path=warp,rpg=1", "path=warp,rpg=2"]},
    (1048576, 64): {"fwd": ["", "rpg=1", "rpg=2", "rpg=4", "exact=1"], "bwd": ["", "rpg=1", "rpg=2", "rpg=4"]},
}


def sweep(args, copy_gbs):
    rows = []
    for shape, variants in SWEEP.items():
        if args.match and args.match not in f"{shape[0]}x{shape[1]}":
            continue
        for op in ("softmax", "log_softmax_backward"):
            bwd = op.endswith("_backward")
            nin = 2 if bwd else 1
            set_bytes = (nin + 1) * shape[0] * shape[1] * 2
            nsets = C.rotation_sets(set_bytes)
            sets = []
            for _ in range(nsets):
                x = torch.randn(shape, device=DEV, dtype=BF) * 3
                ins = [torch.randn(shape, device=DEV, dtype=BF), torch.log_softmax(x, -1)] if bwd else [x]
                sets.append((ins, torch.empty(shape, device=DEV, dtype=BF)))
            ins0, out0 = sets[0]
            ref = torch_fn(op)(*ins0)
            best = None
            # Rounds over the variants (A B C, A B C): the first timing after a pause runs at lower
            # clocks, so a single pass favours whatever comes later. A variant's time is its
            # fastest round.
            runs = {}  # cfg -> its result in each round
            for _ in range(max(1, args.rounds)):
                for cfg in variants["bwd" if bwd else "fwd"]:
                    try:
                        plan = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor(op, [spec(t) for t in ins0], -1, spec(out0)),
                                                     bc.PlanPreference(tuning=cfg))
                        C.poison_(out0)
                        plan.run(out0, *ins0)
                        err = C.rel_err(out0, ref)
                        b = C.GpuBench(lambda i, p=plan: p.run(sets[i][1], *sets[i][0]), nsets)
                        t = C.measure({"v": b}, iters=args.iters, passes=1)["v"].median
                        gbs = set_bytes / t / 1e9
                        r = dict(key=f"{op} {shape[0]}x{shape[1]}", cfg=cfg or "(default)", sku=plan.sku.layout,
                                 us=t * 1e6, gbs=gbs, copy_frac=gbs / copy_gbs, rel_err=err, ok=err <= TOL)
                    except Exception as e:  # noqa: BLE001
                        r = dict(key=f"{op} {shape[0]}x{shape[1]}", cfg=cfg or "(default)", error=str(e)[:80], ok=False)
                    runs.setdefault(cfg, []).append(r)
            for rs in runs.values():  # an error in any round stands; else the fastest round
                errors = [r for r in rs if "error" in r]
                r = errors[0] if errors else dict(min(rs, key=lambda r: r["us"]), ok=all(r["ok"] for r in rs),
                                                  rounds=[round(r["us"], 1) for r in rs])
                rows.append(r)
                if r["ok"] and (best is None or r["us"] < best["us"]):
                    best = r
                print(r["key"], r["cfg"], r.get("sku", "-"), "error: " + r["error"] if "error" in r else
                      f"{r['us']:.1f} us {r['copy_frac']:.0%} of copy rel_err {r['rel_err']:.1e} rounds "
                      f"{' '.join(map(str, r['rounds']))}", flush=True)
            if best is not None:
                print(f"  best for {best['key']}: {best['cfg']} ({best['us']:.1f} us, {best['copy_frac']:.0%} of copy)")
                best["best"] = True
            sets = None  # released; the closures above still name them
            C.free_memory()
    headers = ["row", "cfg", "kernel", "us", "GB/s", "% copy", "rel err", "best"]
    table = [[r["key"], r["cfg"], r.get("sku", "-"), C.fmt(r.get("us")), C.fmt(r.get("gbs"), ".0f"),
              C.fmt(100 * r["copy_frac"] if "copy_frac" in r else None, ".0f"), C.fmt(r.get("rel_err"), ".1e"),
              "*" if r.get("best") else ("ERR" if not r["ok"] else "")] for r in rows]
    return rows, headers, table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="time the kernel-geometry variants (PlanPreference tuning)")
    ap.add_argument("--match", default="", help="--sweep: only the shapes whose 'RxH' contains this")
    ap.add_argument("--rounds", type=int, default=2, help="--sweep: rounds over each shape's variants")
    args = ap.parse_args()
    args.iters, args.passes = (10, 1) if args.quick else (30, 2)
    if args.sweep:
        info = C.device_info()
        copy = C.copy_bandwidth(iters=20, passes=1)
        args.iters = 10 if args.quick else 20
        rows, headers, table = sweep(args, copy["gbs"])
        head = f"{info['name']}, copy {copy['gbs']:.0f} GB/s (sweep of the tuning variants)"
        text = head + "\n" + C.text_table(headers, table)
        print(text)
        C.write_outputs("bench_softmax_sweep", "# bench_softmax --sweep\n\n" + head + "\n\n" +
                        C.markdown_table(headers, table), {"device": info, "copy": copy, "rows": rows}, text)
        return 3 if any("error" in r or not r["ok"] for r in rows) else 0
    keys = [(op, s) for s in SHAPES for op in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")]
    keys += [(op, s) for s in ROWOP_SHAPES for op in ROWOPS]
    keys = [k for k in keys if re.search(args.rows, f"{k[0]} bf16 {k[1][0]}x{k[1][1]}")]
    if args.list:
        for op, s in keys:
            print(f"{op} bf16 {s[0]}x{s[1]}")
        return 0
    info = C.device_info()
    copy = C.copy_bandwidth(iters=20 if args.quick else 50, passes=args.passes)
    rows, failed = [], False
    for op, s in keys:
        try:
            r = (run_rowop_row if op in ROWOPS else run_row)(op, s, args, copy["gbs"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=f"{op} bf16 {s[0]}x{s[1]}", error=str(e), ok=False)
        failed = failed or not r["ok"]
        rows.append(r)
        print(r["key"], "error" if "error" in r else f"{r['gbs']:.0f} GB/s ({r['copy_frac']:.0%} of copy), "
              f"x{r['speedup']:.2f} torch, {r['sku']}, rel_err {r['rel_err']:.1e}", flush=True)
    headers = ["row", "kernel", "ours us", "torch us", "ours GB/s", "% copy", "torch GB/s", "x torch", "rel err", "ok"]
    table = [[r["key"], r.get("sku", "-"), C.fmt(r.get("us")), C.fmt(r.get("torch_us")), C.fmt(r.get("gbs"), ".0f"),
              C.fmt(100 * r["copy_frac"] if "copy_frac" in r else None, ".0f"), C.fmt(r.get("torch_gbs"), ".0f"),
              C.fmt(r.get("speedup"), ".2f"), C.fmt(r.get("rel_err"), ".1e"), "yes" if r["ok"] else "NO"]
             for r in rows]
    head = f"{info['name']}, copy {copy['gbs']:.0f} GB/s, torch {info['torch']}"
    text = head + "\n" + C.text_table(headers, table)
    print(text)
    C.write_outputs("bench_softmax", "# bench_softmax\n\n" + head + "\n\n" + C.markdown_table(headers, table),
                    {"device": info, "copy": copy, "rows": rows}, text)
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
