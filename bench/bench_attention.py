#!/usr/bin/env python3
"""Attention: baracuda against torch's F.scaled_dot_product_attention (whichever backend torch picks:
flash, cuDNN or memory-efficient), same shapes, dtype and work, same timer, same run.

    python3 bench/bench_attention.py            # full run
    python3 bench/bench_attention.py --quick    # fewer samples
    python3 bench/bench_attention.py --rows 'd128'   # regex on the row keys
    OUT=/tmp/out python3 bench/bench_attention.py   # also $OUT/bench_attention.{md,json,txt}

Ours runs through the plan API (selected once, plan.run timed) on [B, S, H, D] tensors; torch takes
the same memory as [B, H, S, D] views (no copies on either side). TFLOP/s counts 4 * B * H * Sq * Sk
* D per forward (half of it for causal), 2.5x that for a backward; inputs rotate through enough sets to
defeat L2.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
F = torch.nn.functional
BF = torch.bfloat16
# (batch, seq, q heads, kv heads, head dim, causal)
FORWARD = [(4, 2048, 16, 16, 128, False), (4, 2048, 16, 16, 128, True), (2, 4096, 32, 8, 128, True),
           (8, 1024, 16, 16, 64, False), (8, 1024, 16, 16, 64, True), (2, 2048, 8, 8, 256, True),
           (1, 8192, 16, 16, 128, True), (16, 512, 16, 16, 128, False)]
BACKWARD = [(2, 1024, 8, 8, 128, True)]
TOL = 3e-2


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), [int(s) for s in t.stride()])


def make_sets(shape_q, shape_kv, n):
    return [tuple(torch.randn(s, device=DEV, dtype=BF) for s in (shape_q, shape_kv, shape_kv)) for _ in range(n)]


def row(case, args, backward=False):
    b, s, hq, hkv, d, causal = case
    shape_q, shape_kv = (b, s, hq, d), (b, s, hkv, d)
    set_bytes = 2 * (2 * b * s * hq * d + 2 * b * s * hkv * d)
    nsets = min(C.rotation_sets(set_bytes), 8)
    sets = make_sets(shape_q, shape_kv, nsets)
    outs = [torch.empty(shape_q, device=DEV, dtype=BF) for _ in range(nsets)]
    lses = [torch.empty((b, hq, s), device=DEV, dtype=torch.float32) for _ in range(nsets)]
    q0, k0, v0 = sets[0]
    fwd = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec(q0), spec(k0), spec(v0), spec(outs[0]),
                                                         causal=causal, lse=True))
    th = lambda t: t.transpose(1, 2)  # noqa: E731
    gqa = hq != hkv
    tf = lambda q, k, v: F.scaled_dot_product_attention(th(q), th(k), th(v), is_causal=causal,  # noqa: E731
                                                        enable_gqa=gqa)
    C.poison_(outs[0])
    fwd.run(q=q0, k=k0, v=v0, out=outs[0], lse=lses[0])
    err = C.rel_err(outs[0], th(tf(q0, k0, v0)))
    flops = 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0)
    if not backward:
        ours = C.GpuBench(lambda i: fwd.run(q=sets[i][0], k=sets[i][1], v=sets[i][2], out=outs[i], lse=lses[i]), nsets)
        theirs = C.GpuBench(lambda i: tf(*sets[i]), nsets)
        sku = fwd.sku.name
    else:
        flops *= 2.5
        for i in range(nsets):
            fwd.run(q=sets[i][0], k=sets[i][1], v=sets[i][2], out=outs[i], lse=lses[i])
        gout = [torch.randn(shape_q, device=DEV, dtype=BF) for _ in range(nsets)]
        grads = [torch.empty_like(t) for t in sets[0]]
        bwd = bc.AttentionPlan.select(bc.AttentionDescriptor("attention_backward", spec(q0), spec(k0), spec(v0),
                                                             spec(outs[0]), causal=causal))
        ws = torch.empty(bwd.workspace_bytes() + 256, device=DEV, dtype=torch.uint8)
        ours = C.GpuBench(lambda i: bwd.run(q=sets[i][0], k=sets[i][1], v=sets[i][2], out=outs[i], lse=lses[i],
                                            grad_out=gout[i], grad_q=grads[0], grad_k=grads[1], grad_v=grads[2],
                                            workspace=ws), nsets)
        req = [[t.detach().clone().requires_grad_() for t in st] for st in sets]
        touts = [th(tf(*st)) for st in req]
        theirs = C.GpuBench(lambda i: torch.autograd.grad(touts[i], req[i], gout[i], retain_graph=True), nsets)
        sku = bwd.sku.name
    t = C.measure({"ours": ours, "torch": theirs}, iters=args.iters, passes=args.passes)
    key = f"{'bwd' if backward else 'fwd'} b{b} s{s} h{hq}/{hkv} d{d}{' causal' if causal else ''}"
    del sets, outs
    C.free_memory()
    return dict(key=key, sku=sku, us=t["ours"].median * 1e6, torch_us=t["torch"].median * 1e6,
                tflops=flops / t["ours"].median / 1e12, torch_tflops=flops / t["torch"].median / 1e12,
                speedup=t["torch"].median / t["ours"].median, rel_err=err, ok=err <= TOL, error=None,
                timing={"ours": t["ours"], "torch": t["torch"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default=None)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    if args.quick:
        args.iters, args.passes = 10, 1
    info = C.device_info()
    t0 = time.time()
    rows = []
    cases = [(c, False) for c in FORWARD] + [(c, True) for c in BACKWARD]
    for case, backward in cases:
        b, s, hq, hkv, d, causal = case
        key = f"{'bwd' if backward else 'fwd'} b{b} s{s} h{hq}/{hkv} d{d}{' causal' if causal else ''}"
        if args.rows and not re.search(args.rows, key):
            continue
        try:
            rows.append(row(case, args, backward))
        except Exception as e:  # noqa: BLE001 (a row's failure is reported in its table row)
            traceback.print_exc()
            rows.append(dict(key=key, error=f"{type(e).__name__}: {e}", ok=False))
        r = rows[-1]
        print(r["key"], r.get("error") or f"{r['us']:.0f} us ({r['tflops']:.0f} TFLOP/s) vs torch "
              f"{r['torch_us']:.0f} us ({r['torch_tflops']:.0f}): {r['speedup']:.2f}x, err {r['rel_err']:.1e}",
              flush=True)
    headers = ["row", "ours us", "ours TFLOP/s", "torch us", "torch TFLOP/s", "speedup", "check", "sku"]
    table = []
    for r in rows:
        if r.get("error"):
            table.append([r["key"], "-", "-", "-", "-", "-", "ERROR", r["error"][:60]])
            continue
        table.append([r["key"], C.fmt(r["us"], ".0f"), C.fmt(r["tflops"], ".0f"), C.fmt(r["torch_us"], ".0f"),
                      C.fmt(r["torch_tflops"], ".0f"), C.fmt(r["speedup"], ".2f") + "x",
                      "ok" if r["ok"] else "FAILED", r["sku"]])
    head = f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}; {len(rows)} rows in " \
           f"{time.time() - t0:.0f} s\n"
    text = head + "\n" + C.text_table(headers, table)
    C.write_outputs("bench_attention", f"# bench_attention\n\n{head}\n" + C.markdown_table(headers, table),
                    {"device": info, "rows": rows}, text)
    print()
    print(text)
    return 0 if all(r.get("ok") for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
