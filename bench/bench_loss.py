#!/usr/bin/env python3
"""Loss family: cross-entropy on large-vocabulary logits, baracuda against torch (same shapes, same
dtype, same timer, same run).

    python3 bench/bench_loss.py [--quick] [--rows REGEX]
    OUT=/tmp/out python3 bench/bench_loss.py   # also $OUT/bench_loss.{md,json,txt}

Rows: forward (loss, mean) vs torch.nn.functional.cross_entropy; fused forward + gradient vs torch
forward + autograd backward. GB/s counts the logits read once (+ the gradient written once for
the fused rows), also as a fraction of the copy bandwidth measured in the same run.
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


def run_row(kind, shape, args, copy_gbs):
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
    desc = bc.LossDescriptor("cross_entropy", spec(s0["x"]), spec(s0["t"]), with_grad=fused,
                             grad_input=spec(s0["g"]) if fused else None)
    plan = bc.LossPlan.select(desc)
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
    b_ours = C.GpuBench(ours, nsets)
    b_torch = C.GpuBench(theirs, nsets)
    tm = C.measure({"ours": b_ours, "torch": b_torch}, iters=args.iters, passes=args.passes)
    moved = n * v * 2 * (2 if fused else 1)
    g = moved / tm["ours"].median / 1e9
    del sets
    C.free_memory()
    return dict(key=f"cross_entropy {kind} bf16 {n}x{v}", sku=plan.sku.layout, us=tm["ours"].median * 1e6,
                torch_us=tm["torch"].median * 1e6, gbs=g, torch_gbs=moved / tm["torch"].median / 1e9,
                copy_frac=g / copy_gbs, speedup=tm["torch"].median / tm["ours"].median, rel_err=err, ok=ok,
                timing={"ours": tm["ours"], "torch": tm["torch"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default="")
    args = ap.parse_args()
    args.iters, args.passes = (5, 1) if args.quick else (15, 2)
    info = C.device_info()
    copy = C.copy_bandwidth(iters=20 if args.quick else 50, passes=args.passes)
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
