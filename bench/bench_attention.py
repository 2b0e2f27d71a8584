#!/usr/bin/env python3
"""Attention: baracuda against torch's F.scaled_dot_product_attention with its flash backend
(FlashAttention-2) and its cuDNN backend, same shapes, dtype and work, same timer, same run.

    python3 bench/bench_attention.py               # the grid below, forward and backward
    python3 bench/bench_attention.py --quick       # fewer samples
    python3 bench/bench_attention.py --rows 'd128' # regex on the row keys
    python3 bench/bench_attention.py --tiles       # also every compiled flash tile (w...: sm_90a)
    python3 bench/bench_attention.py --rows varlen # packed sequences (equal and mixed lengths), fwd + bwd
    python3 bench/bench_attention.py --rows sinks  # gpt-oss attention sinks (full and sliding window)
    python3 bench/bench_attention.py --rows 'softcap|alibi'  # Gemma-2's softcap, ALiBi slopes
    OUT=/tmp/out python3 bench/bench_attention.py  # also $OUT/bench_attention.{md,json,txt}

The grid is flash-attention's: batch = 16384 / seqlen, hidden 2048 (heads = 2048 / D), bf16; plus
the Llama-3-8B attention shape (32 q / 8 kv heads, D 128). Ours runs through the plan API (selected
once, plan.run timed) on [B, S, H, D] tensors: "ours" is the plan's own choice (cuDNN where built),
"our flash" our flash kernels (kernel="flash"), "ours deterministic" the backward with
deterministic=True where the default one is not; torch takes the same memory as [B, H, S, D] views (no
copies on either side). TFLOP/s counts 4 * B * H * Sq * Sk * D per forward (half when causal) and
2.5x that per backward; the backward is timed alone (torch: autograd.grad of a kept graph). "% of dense
peak": TFLOP/s over torch's bf16 8192^3 matmul timed at the start of the same run (the tensor-core rate
a compute-bound kernel can reach on this GPU).
"""
from __future__ import annotations

import argparse
import itertools
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
            def bwd_plan(**kw):
                return bc.AttentionPlan.select(bc.AttentionDescriptor(
                    "attention_backward", spec(q), spec(k), spec(v), spec(self.outs[0]), causal=causal,
                    tile=tile or "auto", **kw))
            self.bwd, self.bwd_flash, self.bwd_det = bwd_plan(), bwd_plan(kernel="flash"), bwd_plan(deterministic=True)
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
    r = None  # the benches' closures hold the row's tensors
    C.free_memory()
    return res


class OursAndFlash:
    """What the varlen and score-rule rows share: q / k / v sets (q_shape, kv_shape; rotated against L2), the
    plan's own choice ("ours", cuDNN where built) and our flash kernel ("flash") selected with `desc`,
    forward (lse on) and backward, run with the same extra operands; `flash_tile` names our flash forward's tile."""
    n = 3

    def __init__(self, q_shape, kv_shape, lse_shape, desc, extras, grad_extras=None, flash_tile=None):
        n = self.n
        self.sets = [tuple(torch.randn(shape, device=DEV, dtype=BF) for shape in (q_shape, kv_shape, kv_shape))
                     for _ in range(n)]
        self.gouts = [torch.randn(q_shape, device=DEV, dtype=BF) for _ in range(n)]
        self.outs = [torch.empty(q_shape, device=DEV, dtype=BF) for _ in range(n)]
        self.lses = [torch.empty(lse_shape, device=DEV, dtype=torch.float32) for _ in range(n)]
        self.grads = [torch.empty_like(t) for t in self.sets[0]]
        self.extras, self.grad_extras = extras, grad_extras or {}
        q0, k0, v0 = self.sets[0]
        specs = (spec(q0), spec(k0), spec(v0), spec(self.outs[0]))
        self.plans = {name: (bc.AttentionPlan.select(bc.AttentionDescriptor(
                                 "attention", *specs, lse=True, kernel=kernel,
                                 tile=(flash_tile or "auto") if kernel == "flash" else "auto", **desc)),
                             bc.AttentionPlan.select(bc.AttentionDescriptor("attention_backward", *specs,
                                                                            kernel=kernel, **desc)))
                      for name, kernel in (("ours", "auto"), ("flash", "flash"))}
        self.ws = torch.empty(max(p.workspace_bytes() for pair in self.plans.values() for p in pair) + 256,
                              device=DEV, dtype=torch.uint8)

    def fwd(self, name, i):
        q, k, v = self.sets[i]
        self.plans[name][0].run(q=q, k=k, v=v, out=self.outs[i], lse=self.lses[i], workspace=self.ws, **self.extras)

    def bwd(self, name, i):
        q, k, v = self.sets[i]
        self.plans[name][1].run(q=q, k=k, v=v, out=self.outs[i], lse=self.lses[i], grad_out=self.gouts[i],
                                grad_q=self.grads[0], grad_k=self.grads[1], grad_v=self.grads[2],
                                workspace=self.ws, **self.extras, **self.grad_extras)

    def benches(self):
        """Forward and backward benches of both; self.err: ours against the flash kernel's output."""
        self.fwd("flash", 0)
        ref = self.outs[0].clone()
        self.fwd("ours", 0)
        self.err = C.rel_err(self.outs[0], ref)
        benches = {f"{name} fwd": C.GpuBench(lambda i, name=name: self.fwd(name, i), self.n) for name in self.plans}
        for i in range(self.n):  # the backward reads each set's forward output and lse
            self.fwd("ours", i)
        benches.update({f"{name} bwd": C.GpuBench(lambda i, name=name: self.bwd(name, i), self.n)
                        for name in self.plans})
        return benches

    def row(self, key, t, flops, **more):
        """The result row: TFLOP/s of each bench (a backward counts 2.5x the forward's FLOPs)."""
        tf = {k: flops * (2.5 if "bwd" in k else 1.0) / v.median / 1e12 for k, v in t.items()}
        sku = self.plans["ours"][0].sku.name
        print(key, {k: f"{v:.0f}" for k, v in tf.items()}, f"rel_err {self.err:.1e}", sku, flush=True)
        return dict(key=key, sku=sku, bwd_sku=self.plans["ours"][1].sku.name, rel_err=self.err, ok=self.err < TOL,
                    **{k.replace(" ", "_") + "_tflops": v for k, v in tf.items()}, **more)


def measure_varlen(case, mixed, args):
    """Packed sequences (cu_seqlens), forward and backward: the plan's own choice (cuDNN where built)
    and our flash kernels; with equal lengths also the same tokens as [B, S, H, D] (the varlen cost at
    the same token count), with mixed lengths (the same total) only the packed plans. Checks: the
    plan's packed output against our flash kernel's, and against the dense one."""
    b, s, hq, hkv, d, causal = case
    total = b * s
    if mixed:  # lengths from s / 8 to 1.75 s, the same total
        g = torch.Generator().manual_seed(b * s)
        lens = (torch.rand(b, generator=g) * 1.625 + 0.125) * s
        lens = (lens / lens.sum() * total).long().clamp(min=1)
        lens[-1] += total - int(lens.sum())
        lens = [int(x) for x in lens]
    else:
        lens = [s] * b
    cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(b)], device=DEV, dtype=torch.int32)
    r = OursAndFlash((total, hq, d), (total, hkv, d), (hq, total),
                     dict(causal=causal, varlen=True, batch=b, max_seqlen_q=max(lens), max_seqlen_k=max(lens)),
                     dict(cu_seqlens_q=cu, cu_seqlens_k=cu))
    benches = r.benches()
    err = r.err
    if not mixed:  # the same tokens as [B, S, H, D] through the plan's own choice
        q0, k0, v0 = r.sets[0]
        dense = lambda t: t.view(b, s, t.shape[1], d)  # noqa: E731
        dplan = bc.AttentionPlan.select(bc.AttentionDescriptor(
            "attention", spec(dense(q0)), spec(dense(k0)), spec(dense(v0)), spec(dense(r.outs[0])), causal=causal))
        dense_out = torch.empty((b, s, hq, d), device=DEV, dtype=BF)
        dplan.run(q=dense(q0), k=dense(k0), v=dense(v0), out=dense_out, workspace=r.ws)
        r.fwd("ours", 0)
        r.err = max(err, C.rel_err(r.outs[0], dense_out.view(total, hq, d)))
        benches["dense fwd"] = C.GpuBench(
            lambda i: dplan.run(q=dense(r.sets[i][0]), k=dense(r.sets[i][1]), v=dense(r.sets[i][2]), out=dense_out,
                                workspace=r.ws), r.n)
    t = C.measure(benches, iters=args.iters, passes=args.passes)
    more = {"varlen_over_dense": t["ours fwd"].median / t["dense fwd"].median} if "dense fwd" in t else {}
    return r.row(f"varlen {'mixed' if mixed else 'equal'} {key_of(case, False)[4:]}", t,
                 4.0 * hq * d * sum(x * x for x in lens) * (0.5 if causal else 1.0), lens=lens, **more)


def measure_rules(label, case, window, desc, extras, grad_extras, args, tile=None):
    """Dense attention under score rules torch's SDPA lacks (sinks, softcap, ALiBi), forward (lse on)
    and backward: the plan's own choice (cuDNN where built: its sink token, its score modifier)
    against our flash kernel."""
    b, s, hq, hkv, d, causal = case
    r = OursAndFlash((b, s, hq, d), (b, s, hkv, d), (b, hq, s), dict(causal=causal, window_left=window, **desc),
                     extras, grad_extras, flash_tile=tile)
    t = C.measure(r.benches(), iters=args.iters, passes=args.passes)
    keys = sum(min(i + 1, window + 1) if window >= 0 else (i + 1 if causal else s) for i in range(s))
    return r.row(f"{label} {key_of(case, False)[4:]}" + (f" window {window}" if window >= 0 else "")
                 + (f" {tile}" if tile else ""), t, 4.0 * b * hq * d * keys)


def rule_rows():
    """(label, case, window, descriptor rules, run extras, backward extras): gpt-oss sinks (a learned
    logit per head, sliding window on alternate layers), Gemma-2's softcap, ALiBi slopes."""
    hq = 64
    sinks = torch.randn(hq, device=DEV)
    return [("sinks", (1, 8192, hq, 8, 64, True), 128, dict(sinks=True), dict(sinks=sinks),
             dict(grad_sinks=torch.empty_like(sinks))),
            ("sinks", (1, 8192, hq, 8, 64, True), -1, dict(sinks=True), dict(sinks=sinks),
             dict(grad_sinks=torch.empty_like(sinks))),
            ("softcap 50", (2, 4096, 16, 8, 128, False), -1, dict(softcap=50.0), {}, {}),
            ("softcap 50", (2, 4096, 16, 8, 128, True), -1, dict(softcap=50.0), {}, {}),
            ("softcap 50", (2, 4096, 16, 8, 128, True), 4096 // 2, dict(softcap=50.0), {}, {}),
            ("alibi", (2, 4096, 32, 32, 128, True), -1, dict(alibi=1),
             dict(alibi_slopes=torch.rand(32, device=DEV) * 0.1), {})]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default=None)
    ap.add_argument("--tiles", action="store_true",
                    help="every compiled flash tile (forward and backward rows; the score-rule rows' forward)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    if args.quick:
        args.iters, args.passes = 8, 1
    info = C.device_info()
    t0 = time.time()
    peak = C.dense_peak_tflops(passes=args.passes)
    cases = [(c, False, None) for c in grid()] + [(c, True, None) for c in grid(dims=(64, 128))]
    if args.tiles:
        tiles = {d: ["m128n64", "m64n64", "m128n32", "w64n64", "w128n64", "w128n128"] for d in (64, 128)}  # w: sm_90a
        tiles[64][2] = "m128n128"  # the mma.sync tiles differ by head dim (flash_fwd_tiles.cuh)
        tiles[256] = ["m64n32", "w128n64"]  # w128n64: the warp-specialized tile at d256
        cases += [(c, False, t) for c in grid() for t in tiles[c[4]]]
        cases += [(c, True, t) for c in grid(dims=(64, 128)) for t in ("m64n64", "w64n64")]  # w: sm_90a
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
    varlen_rows = []
    if not args.rows or re.search(args.rows, "varlen"):
        for case, mixed in [((4, 2048, 16, 16, 128, False), False), ((4, 2048, 16, 16, 128, True), False),
                            ((16, 512, 32, 8, 128, True), False), ((8, 2048, 32, 8, 128, True), True),
                            ((32, 512, 16, 16, 128, False), True)]:
            try:
                varlen_rows.append(measure_varlen(case, mixed, args))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                varlen_rows.append(dict(key=f"varlen {case}", error=f"{type(e).__name__}: {e}", ok=False))
    headers = ["row", "ours TFLOP/s", "ours deterministic", "our flash", "torch fa2", "torch cuDNN", "vs fa2",
               "vs cuDNN", "% of dense peak (ours / flash)", "check", "sku"]
    table = []
    for r in rows:
        if r.get("error"):
            table.append([r["key"], "-", "-", "-", "-", "-", "-", "-", "-", "ERROR", r["error"][:60]])
            continue
        r["peak_frac"] = r["ours_tflops"] / peak
        flash_pct = C.fmt(100 * r["flash_tflops"] / peak if r["flash_tflops"] else None, ".0f")
        table.append([r["key"], C.fmt(r["ours_tflops"], ".0f"), C.fmt(r["det_tflops"], ".0f"),
                      C.fmt(r["flash_tflops"], ".0f"),
                      C.fmt(r["fa2_tflops"], ".0f"),
                      C.fmt(r["cudnn_tflops"], ".0f"),
                      C.fmt(r["vs_fa2"], ".2f") + ("x" if r["vs_fa2"] else ""),
                      C.fmt(r["vs_cudnn"], ".2f") + ("x" if r["vs_cudnn"] else ""),
                      f"{100 * r['peak_frac']:.0f} / {flash_pct}",
                      "ok" if r["ok"] else "FAILED", r["sku"]])
    rule_tiles = [None] + (["m128n64", "m64n64", "w64n64", "w128n128"] if args.tiles else [])  # forward tiles
    for (label, case, window, desc, extras, grad_extras), tile in itertools.product(rule_rows(), rule_tiles):
        if args.rows and not re.search(args.rows, label):
            continue
        try:
            varlen_rows.append(measure_rules(label, case, window, desc, extras, grad_extras, args, tile))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            varlen_rows.append(dict(key=f"{label} {case}", error=f"{type(e).__name__}: {e}", ok=False))
    vheaders = ["row", "ours fwd TFLOP/s", "our flash fwd", "dense fwd", "varlen / dense time", "ours bwd",
                "our flash bwd", "check", "sku"]
    vtable = [[r["key"], "-", "-", "-", "-", "-", "-", "ERROR", r["error"][:60]] if r.get("error") else
              [r["key"], C.fmt(r["ours_fwd_tflops"], ".0f"), C.fmt(r["flash_fwd_tflops"], ".0f"),
               C.fmt(r.get("dense_fwd_tflops"), ".0f"), C.fmt(r.get("varlen_over_dense"), ".3f"),
               C.fmt(r["ours_bwd_tflops"], ".0f"), C.fmt(r["flash_bwd_tflops"], ".0f"),
               "ok" if r["ok"] else "FAILED", r["sku"]] for r in varlen_rows]
    head = f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}; dense peak = torch bf16 " \
           f"8192^3 in this run ({peak:.0f} TFLOP/s); {len(rows)} rows in {time.time() - t0:.0f} s\n"
    text = head + "\n" + C.text_table(headers, table)
    md = f"# bench_attention\n\n{head}\n" + C.markdown_table(headers, table)
    if vtable:
        text += "\n\n" + C.text_table(vheaders, vtable)
        md += "\n\n" + C.markdown_table(vheaders, vtable)
    C.write_outputs("bench_attention", md, {"device": info, "rows": rows, "varlen": varlen_rows,
                                            "peak_tflops": peak}, text)
    print()
    print(text)
    return 0 if all(r.get("ok") for r in rows + varlen_rows) else 3


if __name__ == "__main__":
    sys.exit(main())
