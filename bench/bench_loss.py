#!/usr/bin/env python3
"""Loss family: cross-entropy on large-vocabulary logits, baracuda against torch (same shapes, same
dtype, same timer, same run).

    python3 bench/bench_loss.py [--quick] [--rows REGEX]
    python3 bench/bench_loss.py --sweep      # time the cross-entropy cluster-path variants
    OUT=/tmp/out python3 bench/bench_loss.py   # also $OUT/bench_loss.{md,json,txt}

--sweep sets BARACUDA_CE_CFG (read by LossPlan.select) to each variant in SWEEP on the key
shapes, times ours only (torch once per shape, for the ratio) and prints the best per row.

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


# BARACUDA_CE_CFG variants for --sweep ("" = the default selection).
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
    desc = bc.LossDescriptor("cross_entropy", spec(s0["x"]), spec(s0["t"]), with_grad=fused,
                             grad_input=spec(s0["g"]) if fused else None)
    old = os.environ.get("BARACUDA_CE_CFG")
    if cfg is not None:
        os.environ["BARACUDA_CE_CFG"] = cfg
    try:
        plan = bc.LossPlan.select(desc)
    finally:
        if cfg is not None:
            if old is None:
                os.environ.pop("BARACUDA_CE_CFG", None)
            else:
                os.environ["BARACUDA_CE_CFG"] = old
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
    del sets
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
    del sets
    C.free_memory()
    return dict(key=f"{name} {str(dt).replace('torch.', '')} {shape[0]}x{shape[1]}", sku="pointwise",
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default="")
    ap.add_argument("--sweep", action="store_true", help="time the BARACUDA_CE_CFG variants (SWEEP)")
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
