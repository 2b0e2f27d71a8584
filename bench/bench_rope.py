#!/usr/bin/env python3
"""RoPE: baracuda against torch, same shapes, same work, same timer, same run.

    python3 bench/bench_rope.py            # full run
    python3 bench/bench_rope.py --quick    # fewer samples, one pass
    OUT=/tmp/out python3 bench/bench_rope.py   # also $OUT/bench_rope.{md,json,txt}

Ours: one RopePlan over q and k (one launch, angles from theta, positions given), timed through
plan.run. torch: transformers' formula (q * cos + rotate_half(q) * sin, the same for k) on a
cos / sin cache gathered by the positions, eager, and the same function under torch.compile
(what a compiled model runs). Bandwidth counts q and k read and written once, also as a fraction
of the device copy bandwidth measured at the start of the run.
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
BF = torch.bfloat16
# (tokens, q heads, kv heads, head dim): Llama-3-8B prefill / decode batch, Llama-3-70B, a small model.
SHAPES = [(8192, 32, 8, 128), (64, 32, 8, 128), (4096, 64, 8, 128), (16384, 16, 4, 64)]


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def torch_rope(q, k, cos_cache, sin_cache, pos):
    cos, sin = cos_cache[pos].unsqueeze(1), sin_cache[pos].unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def run_row(shape, args, copy_gbs, compiled, tuning=""):
    t, hq, hk, d = shape
    set_bytes = 2 * (hq + hk) * t * d * 2
    nsets = C.rotation_sets(set_bytes)
    sets = []
    for _ in range(nsets):
        q = torch.randn(t, hq, d, device=DEV, dtype=BF)
        k = torch.randn(t, hk, d, device=DEV, dtype=BF)
        pos = torch.randint(0, 8192, (t,), device=DEV)
        sets.append((q, k, pos, torch.empty_like(q), torch.empty_like(k)))
    inv, _ = bc.rope_frequencies(d, theta=500000.0)
    ang = torch.arange(8192, device=DEV, dtype=torch.float32)[:, None] * torch.tensor(inv, device=DEV)
    emb = torch.cat((ang, ang), dim=-1)
    cos_cache, sin_cache = emb.cos().to(BF), emb.sin().to(BF)
    q0, k0, p0, qo0, ko0 = sets[0]
    desc = bc.RopeDescriptor(bc.TensorSpec(tuple(q0.shape), bc.bfloat16), bc.TensorSpec(tuple(k0.shape), bc.bfloat16),
                             freqs=bc.RopeFrequencies(theta=500000.0), positions=True)
    plan = bc.RopePlan.select(desc, bc.PlanPreference(tuning=tuning))
    C.poison_(qo0)
    plan.run(q=q0, k=k0, q_out=qo0, k_out=ko0, positions=p0)
    rq, rk = torch_rope(q0.float(), k0.float(), emb.cos(), emb.sin(), p0)
    err = max(C.rel_err(qo0, rq), C.rel_err(ko0, rk))
    ok = err <= 2e-2
    ours = C.GpuBench(lambda i: plan.run(q=sets[i][0], k=sets[i][1], q_out=sets[i][3], k_out=sets[i][4],
                                         positions=sets[i][2]), nsets)
    eager = C.GpuBench(lambda i: torch_rope(sets[i][0], sets[i][1], cos_cache, sin_cache, sets[i][2]), nsets)
    # The same bytes through torch's copy_ (q -> q_out, k -> k_out): the ceiling of this shape's traffic
    # (two tensors of tens of MB, not the copy bench's 512 MiB), to read ours against.
    same_bytes = C.GpuBench(lambda i: (sets[i][3].copy_(sets[i][0]), sets[i][4].copy_(sets[i][1])), nsets)
    benches = {"ours": ours, "torch": eager, "copy_qk": same_bytes}
    if t <= 256:  # decode sizes: the kernel alone, 20 launches replayed from a CUDA graph (no host time)
        benches["graph"] = C.GpuBench(lambda i: plan.run(q=sets[i][0], k=sets[i][1], q_out=sets[i][3],
                                                          k_out=sets[i][4], positions=sets[i][2]),
                                      nsets, inner=20, graph=True, warmup=3)
    if compiled is not None:
        benches["compiled"] = C.GpuBench(lambda i: compiled(sets[i][0], sets[i][1], cos_cache, sin_cache, sets[i][2]),
                                         nsets)
    tm = C.measure(benches, iters=args.iters, passes=args.passes)
    sets = None  # released; the closures above still name them
    C.free_memory()
    comp = tm.get("compiled")
    graph = tm.get("graph")
    key = f"rope bf16 t{t} h{hq}/{hk} d{d}" + (f" {tuning}" if tuning else "")
    row = C.bandwidth_row(key, plan.sku.name, ok, err, tm, set_bytes, copy_gbs,
                          graph_us=graph.median * 1e6 if graph else None,
                          compiled_gbs=set_bytes / comp.median / 1e9 if comp else None,
                          speedup_compiled=comp.median / tm["ours"].median if comp else None)
    row["copy_qk_gbs"] = set_bytes / tm["copy_qk"].median / 1e9
    return row


def torch_rope_append(qkv, hq, hk, cos_cache, sin_cache, pos, kc, vc, slots):
    """The decode step's split + rotate + append in torch: q and k rotated (transformers' formula),
    k and v scattered into the flat cache rows."""
    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hk], qkv[:, hq + hk:]
    q, k = torch_rope(q, k, cos_cache, sin_cache, pos)
    kc.view(-1, hk, k.shape[-1]).index_copy_(0, slots, k)
    vc.view(-1, hk, v.shape[-1]).index_copy_(0, slots, v)
    return q


def run_append_row(shape, args, copy_gbs):
    """bc.rope with k_cache / v / v_cache / slot_mapping on the views of one fused qkv projection (q and
    k rotated in place, k and v written to a paged cache, page size 16) next to torch. Bytes: q and k
    read and written, k and v written to the cache, v read."""
    t, hq, hk, d = shape
    pages = (t + 15) // 16 * 2
    set_bytes = (2 * (hq + hk) * d + 3 * hk * d) * t * 2  # bf16: q, k twice; k's cache, v and v's cache once
    nsets = C.rotation_sets(set_bytes)
    sets = []
    for _ in range(nsets):
        qkv = torch.randn(t, hq + 2 * hk, d, device=DEV, dtype=BF)
        pos = torch.randint(0, 8192, (t,), device=DEV)
        slots = torch.randperm(pages * 16, device=DEV)[:t]
        kc, vc = (torch.zeros(pages, 16, hk, d, device=DEV, dtype=BF) for _ in range(2))
        sets.append((qkv, pos, slots, kc, vc))
    inv, _ = bc.rope_frequencies(d, theta=500000.0)
    ang = torch.arange(8192, device=DEV, dtype=torch.float32)[:, None] * torch.tensor(inv, device=DEV)
    emb = torch.cat((ang, ang), dim=-1)
    cos_cache, sin_cache = emb.cos().to(BF), emb.sin().to(BF)

    def ours(i):
        qkv, pos, slots, kc, vc = sets[i]
        bc.rope(qkv[:, :hq], qkv[:, hq:hq + hk], positions=pos, theta=500000.0, inplace=True, k_cache=kc,
                v=qkv[:, hq + hk:], v_cache=vc, slot_mapping=slots)

    qkv0, pos0, slots0, kc0, vc0 = sets[0]
    ref_qkv = qkv0.clone()
    rq, rk = torch_rope(ref_qkv[:, :hq].float(), ref_qkv[:, hq:hq + hk].float(), emb.cos(), emb.sin(), pos0)
    ours(0)
    err = max(C.rel_err(qkv0[:, :hq], rq), C.rel_err(kc0.view(-1, hk, d)[slots0], rk),
              C.rel_err(vc0.view(-1, hk, d)[slots0], ref_qkv[:, hq + hk:].float()))
    eager = C.GpuBench(lambda i: torch_rope_append(sets[i][0], hq, hk, cos_cache, sin_cache, sets[i][1], sets[i][3],
                                                   sets[i][4], sets[i][2]), nsets)
    tm = C.measure({"ours": C.GpuBench(ours, nsets), "torch": eager}, iters=args.iters, passes=args.passes)
    sets = None  # released; the closures above still name them
    C.free_memory()
    return C.bandwidth_row(f"rope+append bf16 t{t} h{hq}/{hk} d{d}", "rope.neox.theta.append", err <= 2e-2, err, tm,
                           set_bytes, copy_gbs, compiled_gbs=None, speedup_compiled=None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--tuning", default="", help="';'-separated PlanPreference.tuning strings to time each row with "
                    "(rope: tpb=N,persistent=1)")
    args = C.parse_bench_args(ap, quick=(10, 1), full=(30, 2))
    info = C.device_info()
    copy = C.copy_bandwidth(iters=20 if args.quick else 50, passes=args.passes)
    compiled = None if args.no_compile else torch.compile(torch_rope)
    rows, t0 = [], time.time()
    for s in SHAPES:
        if not re.search(args.rows, f"t{s[0]} h{s[1]}/{s[2]} d{s[3]}"):
            continue
        for tuning in args.tuning.split(";"):
            try:
                r = run_row(s, args, copy["gbs"], compiled, tuning)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                r = dict(key=f"rope bf16 t{s[0]} h{s[1]}/{s[2]} d{s[3]} {tuning}", error=str(e), ok=False)
            rows.append(r)
            if r["error"]:
                continue
            comp = f", x{r['speedup_compiled']:.2f} torch.compile" if r["speedup_compiled"] else ""
            kern = f", kernel alone {r['graph_us']:.1f} us (CUDA graph)" if r.get("graph_us") else ""
            print(f"{r['key']}: {r['ours_gbs']:.0f} GB/s ({r['ours_copy_frac']:.0%} of copy), x{r['speedup']:.2f} "
                  f"torch eager{comp}{kern}; torch copy_ of the same q / k bytes {r['copy_qk_gbs']:.0f} GB/s; "
                  f"rel_err {r['rel_err']:.1e}", flush=True)
    for s in [(64, 32, 8, 128), (8192, 32, 8, 128)]:  # the fused decode append (issue 24: >= 85% of copy)
        if not re.search(args.rows, f"append t{s[0]} h{s[1]}/{s[2]} d{s[3]}"):
            continue
        try:
            r = run_append_row(s, args, copy["gbs"])
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=f"rope+append bf16 t{s[0]} h{s[1]}/{s[2]} d{s[3]}", error=str(e), ok=False)
        rows.append(r)
    return C.report_bandwidth_rows("bench_rope", rows, info=info, copy_gbs=copy["gbs"], seed=None,
                                   elapsed=time.time() - t0, version=bc.__version__)


if __name__ == "__main__":
    sys.exit(main())
