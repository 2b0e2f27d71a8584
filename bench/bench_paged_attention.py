#!/usr/bin/env python3
"""Paged decode attention: baracuda against torch, same work, same timer, same run.

    python3 bench/bench_paged_attention.py            # full run
    python3 bench/bench_paged_attention.py --quick    # fewer samples, one pass
    OUT=/tmp/out python3 bench/bench_paged_attention.py   # also $OUT/bench_paged_attention.{md,json,txt}

Ours: one PagedAttentionPlan over a paged cache (page size 16, each request's pages in random
order across the pool), timed through plan.run (the decode step's form: lengths and the table read
on the device). torch: F.scaled_dot_product_attention on the same keys and values unpaged
(contiguous [B, Hkv, S, D], enable_gqa; causal lower-right for several query tokens), which is
less work than a paged read. Bandwidth counts the keys and values read once (q and out are
negligible), also as a fraction of the device copy bandwidth measured at the start of the run.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import baracuda as bc  # noqa: E402

DEV = "cuda"
BF = torch.bfloat16
PAGE = 16
# (batch, context, query tokens, q heads, kv heads, head dim): Llama-3-8B's heads at serving batch
# sizes, a batch-1 latency row, speculative decoding with 4 tokens, a long context, Llama-3-70B's
# 64 / 8 heads, a 64-dim small model; 32 new tokens (128 rows per kv head: where "auto" starts
# taking 64-row blocks); then chunked prefills (128 / 512 new tokens against cached pages:
# compute-bound, cuDNN's paged attention under "auto"; read their time, not their GB/s), the first again
# with a block table four times wider than the contexts (an engine's table sized for its longest
# request: the optional 7th field, the table's keys).
SHAPES = [(32, 8192, 1, 32, 8, 128), (64, 8192, 1, 32, 8, 128), (1, 2048, 1, 32, 8, 128), (32, 8192, 4, 32, 8, 128),
          (4, 32768, 1, 32, 8, 128), (128, 1024, 1, 32, 8, 128), (16, 4096, 1, 64, 8, 128),
          (64, 2048, 1, 16, 4, 64), (32, 4096, 32, 32, 8, 128), (8, 2048, 128, 32, 8, 128),
          (4, 4096, 512, 32, 8, 128), (8, 2048, 128, 32, 8, 128, 8192)]


def shape_key(shape):
    key = "b{} ctx{} q{} h{}/{} d{}".format(*shape[:6])
    return key + (f" tbl{shape[6]}" if len(shape) > 6 else "")


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), tuple(t.stride()))


def torch_decode(q, k, v, mask):
    # q [B, Hq, Sq, D], k / v [B, Hkv, S, D]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def run_row(shape, args, copy_gbs, splits=0, tuning=""):
    b, ctx, sq, hq, hk, d = shape[:6]
    fp8 = torch.float8_e4m3fn if args.fp8 else None
    dt = {"bf16": BF, "f16": torch.float16}[args.dtype]
    kv_bytes = 2 * b * ctx * hk * d * (1 if fp8 else 2)
    nsets = C.rotation_sets(kv_bytes, min_sets=2)
    pages_per = (ctx + PAGE - 1) // PAGE
    cols = (shape[6] + PAGE - 1) // PAGE if len(shape) > 6 else pages_per  # the table's columns
    sets = []
    for _ in range(nsets):
        if args.heads_first:  # [pages, Hkv, page_size, D] as its permuted view
            kc = torch.randn(b * pages_per, hk, PAGE, d, device=DEV, dtype=dt).transpose(1, 2)
            vc = torch.randn(b * pages_per, hk, PAGE, d, device=DEV, dtype=dt).transpose(1, 2)
        else:
            kc = torch.randn(b * pages_per, PAGE, hk, d, device=DEV, dtype=dt)
            vc = torch.randn_like(kc)
        if fp8:  # an fp8 e4m3 cache (scales 1); torch reads the same values as q's dtype
            kc, vc = kc.to(fp8), vc.to(fp8)
        order = torch.arange(b * pages_per, device=DEV) if args.in_order else torch.randperm(b * pages_per, device=DEV)
        table = torch.zeros(b, cols, dtype=torch.int32, device=DEV)  # columns past the keys: page 0, never read
        table[:, :pages_per] = order.to(torch.int32).view(b, pages_per)
        q = torch.randn(b, sq, hq, d, device=DEV, dtype=dt)
        sets.append((q, kc, vc, table, torch.empty_like(q)))
    seq_lens = torch.full((b,), ctx, dtype=torch.int32, device=DEV)
    q0, kc0, vc0, t0, o0 = sets[0]
    plan = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(spec(q0), spec(kc0), spec(vc0), spec(o0),
                                                                     cols, num_splits=splits,
                                                                     kernel=args.kernel),
                                        bc.PlanPreference(tuning=tuning))
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)

    def unpaged(kc, table):  # [B, Hkv, S, D], the same keys in order
        kc = kc.to(dt) if fp8 else kc
        return kc[table[:, :pages_per].long()].reshape(b, pages_per * PAGE, hk, d)[:, :ctx].transpose(1, 2).contiguous()

    # torch's inputs: the same keys unpaged; only the first set is kept for the check, the rest rotate
    tsets = []
    for q, kc, vc, table, _ in sets:
        tsets.append((q.transpose(1, 2).contiguous(), unpaged(kc, table), unpaged(vc, table)))
    mask = None
    if sq > 1:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(sq, ctx)
    C.poison_(o0)
    plan.run(q=q0, k_cache=kc0, v_cache=vc0, block_table=t0, seq_lens=seq_lens, out=o0, workspace=ws)
    tq, tk, tv = tsets[0]
    ref = torch_decode(tq.float(), tk.float(), tv.float(), mask).transpose(1, 2)
    err = C.rel_err(o0, ref)
    ok = err <= 2e-2
    ours = C.GpuBench(lambda i: plan.run(q=sets[i][0], k_cache=sets[i][1], v_cache=sets[i][2], block_table=sets[i][3],
                                         seq_lens=seq_lens, out=sets[i][4], workspace=ws), nsets)
    eager = C.GpuBench(lambda i: torch_decode(*tsets[i], mask), nsets)
    tm = C.measure({"ours": ours, "torch": eager}, iters=args.iters, passes=args.passes)
    sets = tsets = None  # the benches' closures hold them
    C.free_memory()
    suffix = (" fp8" if fp8 else "") + (f" {args.dtype}" if args.dtype != "bf16" else "") + (f" {args.kernel}" if args.kernel != "auto" else "") + (f" s{splits}" if splits else "") + (f" {tuning}" if tuning else "") + (" hf" if args.heads_first else "") + (" ordered" if args.in_order else "")
    return C.bandwidth_row(shape_key(shape) + suffix, plan.sku.name, ok, err, tm, kv_bytes,
                           copy_gbs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", default="0", help="comma-separated split counts to time each row with (0: the plan's)")
    ap.add_argument("--heads-first", action="store_true", help="the cache as [pages, Hkv, page_size, D]")
    ap.add_argument("--in-order", action="store_true", help="each request's pages consecutive (default: shuffled)")
    ap.add_argument("--fp8", action="store_true", help="fp8 e4m3 caches (scales 1; torch reads them in q's dtype)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"], help="q (and the 16-bit cache) dtype")
    ap.add_argument("--kernel", default="auto", choices=["auto", "mma", "rowwise", "cudnn"], help="the plan's kernel")
    ap.add_argument("--tuning", default="", help="';'-separated PlanPreference.tuning strings to time each row with")
    args = C.parse_bench_args(ap)
    info = C.device_info()
    copy = C.copy_bandwidth(iters=20 if args.quick else 50, passes=args.passes)
    rows, t0 = [], time.time()
    for s in SHAPES:
        key = shape_key(s)
        if not re.search(args.rows, key):
            continue
        for splits, tuning in ((int(v), t) for v in args.splits.split(",") for t in args.tuning.split(";")):
            try:
                r = run_row(s, args, copy["gbs"], splits, tuning)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                r = dict(key=key, error=str(e), ok=False)
            rows.append(r)
            if not r["error"]:
                print(f"{r['key']}: {r['ours_gbs']:.0f} GB/s ({r['ours_copy_frac']:.0%} of copy), {r['ours_us']:.1f} us "
                      f"vs torch {r['torch_us']:.1f} us: x{r['speedup']:.2f}, rel_err {r['rel_err']:.1e} [{r['sku']}]",
                      flush=True)
    return C.report_bandwidth_rows("bench_paged_attention", rows, info=info, copy_gbs=copy["gbs"], seed=None,
                                   elapsed=time.time() - t0, version=bc.__version__)


if __name__ == "__main__":
    sys.exit(main())
