#!/usr/bin/env python3
"""Embedding: baracuda against torch, same shapes, same timer, same run.

    python3 bench/bench_embedding.py            # full run
    python3 bench/bench_embedding.py --quick    # fewer samples, one pass
    OUT=/tmp/out python3 bench/bench_embedding.py   # also $OUT/bench_embedding.{md,json,txt}

Forward: bc.embedding(out=) next to torch.nn.functional.embedding; bytes = the gathered rows read
and written once. Backward: bc.embedding_backward (deterministic: sorted indices, fixed-order
sums; and the atomic option) next to torch's aten.embedding_dense_backward (what nn.Embedding's
backward runs); bytes = grad_out read once and the whole table gradient written once. Both as a
fraction of the device copy bandwidth measured at the start of the run.
"""
from __future__ import annotations

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
BF = torch.bfloat16
BC_DT = {BF: bc.bfloat16, torch.float32: bc.float32}
# (direction, tokens, vocabulary, dim, dtype, repeats): Llama-3-8B training batch, Llama-2 / GPT-2 sizes,
# a decode step; "zipf": a skewed (real-text-like) index distribution with hot tokens.
ROWS = [("fwd", 16384, 128256, 4096, BF, "uniform"), ("fwd", 8192, 32000, 4096, BF, "uniform"),
        ("fwd", 16384, 50257, 768, torch.float32, "uniform"), ("fwd", 64, 128256, 4096, BF, "uniform"),
        ("bwd", 16384, 128256, 4096, BF, "zipf"), ("bwd", 8192, 32000, 4096, BF, "zipf"),
        ("bwd", 16384, 50257, 768, torch.float32, "zipf"), ("bwd", 65536, 32000, 1024, BF, "zipf"),
        ("bwd-atomic", 8192, 32000, 4096, BF, "zipf")]


def indices(n, v, kind):
    if kind == "uniform":
        return torch.randint(0, v, (n,), device=DEV)
    ranks = torch.arange(1, v + 1, device=DEV, dtype=torch.float64)
    return torch.multinomial((1.0 / ranks).float(), n, replacement=True)


def run_row(row, args, copy_gbs):
    kind, n, v, d, dt, dist = row
    es = torch.tensor([], dtype=dt).element_size()
    fwd = kind == "fwd"
    set_bytes = (2 * n * d if fwd else n * d + v * d) * es
    nsets = min(C.rotation_sets(set_bytes), 4)
    w = torch.randn(v, d, device=DEV, dtype=dt)
    sets = []
    for _ in range(nsets):
        idx = indices(n, v, dist)
        if fwd:
            sets.append((idx, torch.empty(n, d, device=DEV, dtype=dt)))
        else:
            sets.append((idx, torch.randn(n, d, device=DEV, dtype=dt), torch.empty(v, d, device=DEV, dtype=dt)))
    det = kind != "bwd-atomic"
    if fwd:
        idx0, out0 = sets[0]
        C.poison_(out0)
        sku = bc._C.embedding_call({"weight": w, "indices": idx0, "out": out0}, -1, False, True, None)
        ok, err = torch.equal(out0, torch.nn.functional.embedding(idx0, w)), 0.0
        ours = C.GpuBench(lambda i: bc.embedding(sets[i][0], w, out=sets[i][1]), nsets)
        ref = C.GpuBench(lambda i: torch.nn.functional.embedding(sets[i][0], w), nsets)
    else:
        idx0, g0, gw0 = sets[0]
        C.poison_(gw0)
        bc.embedding_backward(g0, idx0, v, deterministic=det, out=gw0)
        want = torch.zeros(v, d, device=DEV, dtype=torch.float32).index_add_(0, idx0, g0.float())
        err = C.rel_err(gw0, want)
        ok = err <= (2e-2 if dt == BF else 1e-4)
        plan = bc.EmbeddingPlan.select(bc.EmbeddingDescriptor(
            bc.TensorSpec((v, d), BC_DT[dt]), bc.TensorSpec((n,), bc.int64), bc.TensorSpec((n, d), BC_DT[dt]),
            backward=True, deterministic=det))
        sku = plan.sku.name
        ours = C.GpuBench(lambda i: bc.embedding_backward(sets[i][1], sets[i][0], v, deterministic=det,
                                                          out=sets[i][2]), nsets)
        ref = C.GpuBench(lambda i: torch.ops.aten.embedding_dense_backward(sets[i][1], sets[i][0], v, -1, False),
                         nsets)
    tm = C.measure({"ours": ours, "torch": ref}, iters=args.iters, passes=args.passes)
    sets = None  # released; the closures above still name them
    C.free_memory()
    return C.bandwidth_row(f"{kind} {str(dt)[6:]} n{n} V{v} D{d} {dist}", sku, ok, err, tm, set_bytes, copy_gbs)


def main():
    args = C.parse_bench_args(quick=(10, 1), full=(30, 2))
    info = C.device_info()
    copy = C.copy_bandwidth(iters=20 if args.quick else 50, passes=args.passes)
    rows, t0 = [], time.time()
    for row in ROWS:
        key = f"{row[0]} n{row[1]} V{row[2]} D{row[3]}"
        if not re.search(args.rows, key):
            continue
        try:
            r = run_row(row, args, copy["gbs"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=key, error=str(e), ok=False)
        rows.append(r)
        if not r["error"]:
            print(f"{r['key']}: ours {r['ours_us']:.1f} us ({r['ours_copy_frac']:.0%} of copy), torch "
                  f"{r['torch_us']:.1f} us, x{r['speedup']:.2f}, rel_err {r['rel_err']:.1e}", flush=True)
    return C.report_bandwidth_rows("bench_embedding", rows, info=info, copy_gbs=copy["gbs"], seed=None,
                                   elapsed=time.time() - t0, version=bc.__version__)


if __name__ == "__main__":
    sys.exit(main())
