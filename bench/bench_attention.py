#!/usr/bin/env python3
"""Attention: baracuda against torch's F.scaled_dot_product_attention with its flash backend
(FlashAttention-2) and its cuDNN backend, same shapes, dtype and work, same timer, same run.

    python3 bench/bench_attention.py               # the grid below, forward and backward
    python3 bench/bench_attention.py --quick       # fewer samples
    python3 bench/bench_attention.py --rows 'd128' # regex on the row keys
    python3 bench/bench_attention.py --tiles       # also every compiled flash forward tile
    python3 bench/bench_attention.py --rows varlen # packed sequences against [B, S, H, D], same tokens
    OUT=/tmp/out python3 bench/bench_attention.py  # also $OUT/bench_attention.{md,json,txt}

The grid is flash-attention's: batch = 16384 / seqlen, hidden 2048 (heads = 2048 / D), bf16; plus
the Llama-3-8B attention shape (32 q / 8 kv heads, D 128). Ours runs through the plan API (selected
once, plan.run timed) on [B, S, H, D] tensors: "ours" is the plan's own choice (cuDNN where built),
"our flash" our flash kernels (kernel="flash"), "ours deterministic" the backward with
deterministic=True where the default one is not; torch takes the same memory as [B, H, S, D] views (no
copies on either side). TFLOP/s counts 4 * B * H * Sq * Sk * D per forward (half when causal) and
2.5x that per backward; the backward is timed alone (torch: autograd.grad of a kept graph).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
F = torch.nn.functional
BF = torch.bfloat16
TOL = 3e-2
BACKENDS = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def grid(seqlens=(512, 2048, 8192), dims=(64, 128, 256)):
    rows = []
    for s in seqlens:
        for d in dims:
            for causal in (False, True):
                rows.append((16384 // s, s, 2048 // d, 2048 // d, d, causal))
    rows += [(4, 4096, 32, 8, 128, False), (4, 4096, 32, 8, 128, True)]
    return rows


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), [int(s) for s in t.stride()])


def key_of(case, backward, tile=None):
    b, s, hq, hkv, d, causal = case
    return (f"{'bwd' if backward else 'fwd'} b{b} s{s} h{hq}/{hkv} d{d}{' causal' if causal else ''}"
            + (f" {tile}" if tile else ""))


class Row:
    """One case's tensors (rotated sets against L2), our plans and torch's calls."""

    def __init__(self, case, backward, tile):
        b, s, hq, hkv, d, causal = self.case = case
        self.backward, self.causal = backward, causal
        set_bytes = 2 * (2 * b * s * hq * d + 2 * b * s * hkv * d) * (2 if backward else 1)
        self.n = min(C.rotation_sets(set_bytes), 6)
        self.sets = [tuple(torch.randn(shape, device=DEV, dtype=BF) for shape in
                           ((b, s, hq, d), (b, s, hkv, d), (b, s, hkv, d))) for _ in range(self.n)]
        self.outs = [torch.empty((b, s, hq, d), device=DEV, dtype=BF) for _ in range(self.n)]
        self.lses = [torch.empty((b, hq, s), device=DEV, dtype=torch.float32) for _ in range(self.n)]
        q, k, v = self.sets[0]
        # ours: the plan's own choice (cuDNN where built and it takes the case); flash: our kernels
        self.fwd = bc.AttentionPlan.select(bc.AttentionDescriptor(
            "attention", spec(q), spec(k), spec(v), spec(self.outs[0]), causal=causal, lse=True, tile=tile or "auto"))
        self.fwd_flash = bc.AttentionPlan.select(bc.AttentionDescriptor(
            "attention", spec(q), spec(k), spec(v), spec(self.outs[0]), causal=causal, lse=True, tile=tile or "auto",
            kernel="flash"))
        self.fws = torch.empty(self.fwd.workspace_bytes() + 256, device=DEV, dtype=torch.uint8)
        self.flops = 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0) * (2.5 if backward else 1.0)
        self.gqa = hq != hkv
        if backward:
            for i in range(self.n):
                self.run_fwd(i)
            self.gout = [torch.randn((b, s, hq, d), device=DEV, dtype=BF) for _ in range(self.n)]
            self.grads = [torch.empty_like(t) for t in self.sets[0]]
            self.bwd = bc.AttentionPlan.select(bc.AttentionDescriptor(
                "attention_backward", spec(q), spec(k), spec(v), spec(self.outs[0]), causal=causal))
            self.bwd_flash = bc.AttentionPlan.select(bc.AttentionDescriptor(
                "attention_backward", spec(q), spec(k), spec(v), spec(self.outs[0]), causal=causal, kernel="flash"))
            self.bwd_det = bc.AttentionPlan.select(bc.AttentionDescriptor(
                "attention_backward", spec(q), spec(k), spec(v), spec(self.outs[0]), causal=causal,
                deterministic=True))
            self.ws = torch.empty(max(p.workspace_bytes() for p in (self.bwd, self.bwd_flash, self.bwd_det)) + 256,
                                  device=DEV, dtype=torch.uint8)

    def run_fwd(self, i, flash=False):
        q, k, v = self.sets[i]
        (self.fwd_flash if flash else self.fwd).run(q=q, k=k, v=v, out=self.outs[i], lse=self.lses[i],
                                                    workspace=self.fws)

    def run_bwd(self, i, flash=False, deterministic=False):
        q, k, v = self.sets[i]
        (self.bwd_flash if flash else self.bwd_det if deterministic else self.bwd).run(
            q=q, k=k, v=v, out=self.outs[i], lse=self.lses[i], grad_out=self.gout[i], grad_q=self.grads[0],
            grad_k=self.grads[1], grad_v=self.grads[2], workspace=self.ws)

    def torch_sdpa(self, q, k, v):
        th = lambda t: t.transpose(1, 2)  # noqa: E731
        return th(F.scaled_dot_product_attention(th(q), th(k), th(v), is_causal=self.causal, enable_gqa=self.gqa))

    def torch_bench(self, backend):
        with sdpa_kernel(BACKENDS[backend]):
            if not self.backward:
                self.torch_sdpa(*self.sets[0])  # raises here when the backend cannot take the case

                def call(i):
                    with sdpa_kernel(BACKENDS[backend]):
                        self.torch_sdpa(*self.sets[i])
                return C.GpuBench(call, self.n)
            req = [[t.detach().clone().requires_grad_() for t in st] for st in self.sets]
            outs = [self.torch_sdpa(*st) for st in req]
        return C.GpuBench(lambda i: torch.autograd.grad(outs[i], req[i], self.gout[i], retain_graph=True), self.n)


def measure_row(case, backward, tile, args):
    r = Row(case, backward, tile)
    q0, k0, v0 = r.sets[0]
    C.poison_(r.outs[0])
    r.run_fwd(0)
    err = C.rel_err(r.outs[0], r.torch_sdpa(q0, k0, v0))
    benches = {"ours": C.GpuBench(r.run_bwd if backward else r.run_fwd, r.n)}
    if (r.bwd if backward else r.fwd).sku.backend == bc.Backend.cudnn:  # also our own flash kernels
        benches["flash"] = C.GpuBench(lambda i: (r.run_bwd if backward else r.run_fwd)(i, flash=True), r.n)
        if backward and not r.bwd.sku.precision.deterministic:  # cuDNN's deterministic backward
            benches["det"] = C.GpuBench(lambda i: r.run_bwd(i, deterministic=True), r.n)
    skipped = {}
    for name in BACKENDS:
        try:
            benches[name] = r.torch_bench(name)
        except Exception as e:  # noqa: BLE001 (a backend that cannot take the case is reported, not fatal)
            skipped[name] = f"{type(e).__name__}"
    t = C.measure(benches, iters=args.iters, passes=args.passes)
    res = dict(key=key_of(case, backward, tile), sku=(r.bwd if backward else r.fwd).sku.name, rel_err=err,
               ok=err <= TOL, error=None, timing=t)
    for name in ("ours", "flash", "det") + tuple(BACKENDS):
        res[f"{name}_us"] = t[name].median * 1e6 if name in t else None
        res[f"{name}_tflops"] = r.flops / t[name].median / 1e12 if name in t else None
    for name in BACKENDS:
        res[f"vs_{name}"] = t[name].median / t["ours"].median if name in t else None
    del r
    C.free_memory()
    return res


def measure_varlen(case, args):
    """Ours on packed sequences (all of length S, cu_seqlens) against ours on the same tokens as
    [B, S, H, D]: the varlen cost at the same token count. The outputs must agree bitwise."""
    b, s, hq, hkv, d, causal = case
    n = 4
    sets = [tuple(torch.randn(shape, device=DEV, dtype=BF) for shape in ((b, s, hq, d), (b, s, hkv, d), (b, s, hkv, d)))
            for _ in range(n)]
    cu = torch.arange(0, b * s + 1, s, device=DEV, dtype=torch.int32)
    outs = [torch.empty((b, s, hq, d), device=DEV, dtype=BF) for _ in range(n)]
    q0, k0, v0 = sets[0]
    dense = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec(q0), spec(k0), spec(v0),
                                                           spec(outs[0]), causal=causal, kernel="flash"))
    flat = lambda t: t.view(b * s, t.shape[2], d)  # noqa: E731
    packed = bc.AttentionPlan.select(bc.AttentionDescriptor(
        "attention", spec(flat(q0)), spec(flat(k0)), spec(flat(v0)), spec(flat(outs[0])), causal=causal, varlen=True,
        batch=b, max_seqlen_q=s, max_seqlen_k=s))
    dense.run(q=q0, k=k0, v=v0, out=outs[0])
    ref = outs[0].clone()
    packed.run(q=flat(q0), k=flat(k0), v=flat(v0), out=flat(outs[0]), cu_seqlens_q=cu, cu_seqlens_k=cu)
    same = torch.equal(ref, outs[0])
    t = C.measure({
        "dense": C.GpuBench(lambda i: dense.run(q=sets[i][0], k=sets[i][1], v=sets[i][2], out=outs[i]), n),
        "varlen": C.GpuBench(lambda i: packed.run(q=flat(sets[i][0]), k=flat(sets[i][1]), v=flat(sets[i][2]),
                                                  out=flat(outs[i]), cu_seqlens_q=cu, cu_seqlens_k=cu), n)},
        iters=args.iters, passes=args.passes)
    flops = 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0)
    key = f"varlen {key_of(case, False)}"
    print(f"{key}: varlen {flops / t['varlen'].median / 1e12:.0f} TFLOP/s, dense {flops / t['dense'].median / 1e12:.0f}, "
          f"varlen / dense time {t['varlen'].median / t['dense'].median:.3f}, outputs {'equal' if same else 'DIFFER'}",
          flush=True)
    return same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default=None)
    ap.add_argument("--tiles", action="store_true", help="every compiled flash forward tile (forward rows)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    if args.quick:
        args.iters, args.passes = 8, 1
    info = C.device_info()
    t0 = time.time()
    cases = [(c, False, None) for c in grid()] + [(c, True, None) for c in grid(dims=(64, 128))]
    if args.tiles:
        tiles = {64: ["m64n64", "m128n32"], 128: ["m64n64", "m128n32"]}
        cases += [(c, False, t) for c in grid(dims=(64, 128)) for t in tiles[c[4]]]
    rows = []
    for case, backward, tile in cases:
        key = key_of(case, backward, tile)
        if args.rows and not re.search(args.rows, key):
            continue
        try:
            rows.append(measure_row(case, backward, tile, args))
        except Exception as e:  # noqa: BLE001 (a row's failure is reported in its table row)
            traceback.print_exc()
            rows.append(dict(key=key, error=f"{type(e).__name__}: {e}", ok=False))
        r = rows[-1]
        print(r["key"], r.get("error") or
              f"{r['ours_tflops']:.0f} TFLOP/s (our flash {C.fmt(r['flash_tflops'], '.0f')}) vs fa2 "
              f"{C.fmt(r['fa2_tflops'], '.0f')} cudnn "
              f"{C.fmt(r['cudnn_tflops'], '.0f')}", flush=True)
    varlen_ok = True
    if not args.rows or re.search(args.rows, "varlen"):
        for case in [(4, 2048, 16, 16, 128, False), (4, 2048, 16, 16, 128, True), (16, 512, 32, 8, 128, True)]:
            try:
                varlen_ok &= measure_varlen(case, args)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                varlen_ok = False
    headers = ["row", "ours TFLOP/s", "ours deterministic", "our flash", "torch fa2", "torch cuDNN", "vs fa2",
               "vs cuDNN", "check", "sku"]
    table = []
    for r in rows:
        if r.get("error"):
            table.append([r["key"], "-", "-", "-", "-", "-", "-", "-", "ERROR", r["error"][:60]])
            continue
        table.append([r["key"], C.fmt(r["ours_tflops"], ".0f"), C.fmt(r["det_tflops"], ".0f"),
                      C.fmt(r["flash_tflops"], ".0f"),
                      C.fmt(r["fa2_tflops"], ".0f"),
                      C.fmt(r["cudnn_tflops"], ".0f"),
                      C.fmt(r["vs_fa2"], ".2f") + ("x" if r["vs_fa2"] else ""),
                      C.fmt(r["vs_cudnn"], ".2f") + ("x" if r["vs_cudnn"] else ""),
                      "ok" if r["ok"] else "FAILED", r["sku"]])
    head = f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}; {len(rows)} rows in " \
           f"{time.time() - t0:.0f} s\n"
    text = head + "\n" + C.text_table(headers, table)
    C.write_outputs("bench_attention", f"# bench_attention\n\n{head}\n" + C.markdown_table(headers, table),
                    {"device": info, "rows": rows}, text)
    print()
    print(text)
    return 0 if all(r.get("ok") for r in rows) and varlen_ok else 3


if __name__ == "__main__":
    sys.exit(main())
