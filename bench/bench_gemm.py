#!/usr/bin/env python3
"""GEMM family: baracuda against torch, same shapes, same dtypes, same timer, same run.

    python3 bench/bench_gemm.py            # full run
    python3 bench/bench_gemm.py --quick    # fewer samples, one pass
    python3 bench/bench_gemm.py --rows 'decode|llm'   # regex on row keys (see --list)
    OUT=/tmp/out python3 bench/bench_gemm.py   # also $OUT/bench_gemm.{md,json,txt}

Rows: dense 8192^3 (bf16, f16, tf32, fp8) as TFLOP/s and as a fraction of torch's bf16 8192^3
in this run (the measured dense peak); LLM linear shapes (tokens x 4096->4096, 4096->14336,
14336->4096); bias + gelu after a linear (ours fused / two-pass vs torch's linear then gelu);
the decode regime (1..16 tokens) as GB/s of weight bytes read. Ours runs through the
functional API (plan cached in the core), as a user calls it. Weights rotate among copies
when one set would sit in L2.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
BF, F16, F32 = torch.bfloat16, torch.float16, torch.float32
E4M3 = torch.float8_e4m3fn
TOL = {BF: 2e-2, F16: 5e-3, F32: 2e-3}


@dataclass
class Case:
    key: str
    group: str
    make: Callable          # () -> (ours(i), theirs(i), nsets, flops, weight_bytes, check() -> rel err)
    note: str = ""


@contextlib.contextmanager
def torch_tf32(on):
    """torch's f32 matmuls in tf32 (on) or IEEE while inside: torch's side of a tf32 row."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _sets(bytes_per_set):
    return C.rotation_sets(bytes_per_set, factor=3.0, min_sets=1, max_sets=8)


def linear_case(m, n, k, dt=BF, *, act=None, fused_torch=False, bias=None, tf32=False):
    def make():
        w_bytes = n * k * torch.finfo(dt).bits // 8
        nsets = _sets(w_bytes + m * (n + k) * 2)
        xs = [torch.randn(m, k, device=DEV, dtype=dt) for _ in range(nsets)]
        ws = [torch.randn(n, k, device=DEV, dtype=dt) * k ** -0.5 for _ in range(nsets)]
        with_bias = bool(act) if bias is None else bias
        bs = [torch.randn(n, device=DEV, dtype=dt) for _ in range(nsets)] if with_bias else [None] * nsets

        def ours(i):
            return bc.linear(xs[i], ws[i], bs[i], activation=act or "none", allow_tf32=tf32)

        def theirs(i):
            y = F.linear(xs[i], ws[i], bs[i])
            if act == "gelu":
                return F.gelu(y)
            if act == "gelu_tanh":
                return F.gelu(y, approximate="tanh")
            return y

        def check():
            with torch_tf32(tf32):
                return C.rel_err(ours(0).float(), theirs(0).float())

        return ours, theirs, nsets, 2 * m * n * k, w_bytes, check

    return make


def dense_case(side, dt, tf32=False):
    def make():
        a = torch.randn(side, side, device=DEV, dtype=dt)
        b = torch.randn(side, side, device=DEV, dtype=dt)

        def ours(i):
            return bc.matmul(a, b, allow_tf32=tf32)

        def theirs(i):
            return a @ b

        def check():
            with torch_tf32(tf32):
                return C.rel_err(ours(0).float(), theirs(0).float())

        return ours, theirs, 1, 2 * side ** 3, 0, check

    return make


def fp8_case(m, n, k):
    def make():
        a = torch.randn(m, k, device=DEV).to(E4M3)
        w = torch.randn(n, k, device=DEV).to(E4M3)
        sa = torch.tensor(1.0, device=DEV)
        sb = torch.tensor(1.0, device=DEV)

        def ours(i):
            return bc.scaled_mm(a, w.t(), sa, sb, out_dtype=BF)

        def theirs(i):
            return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=BF)

        def check():
            return C.rel_err(ours(0).float(), theirs(0).float())

        return ours, theirs, 1, 2 * m * n * k, 0, check

    return make


def moe_case(e, tokens_per_expert, n, k, path):
    """E experts, `tokens_per_expert` rows each (random 0..2x for the small case), ours vs a torch loop."""
    def make():
        g = torch.Generator().manual_seed(e * 1000 + tokens_per_expert)
        if tokens_per_expert <= 16:
            counts = torch.randint(0, 2 * tokens_per_expert + 1, (e,), generator=g).tolist()
        else:
            counts = [tokens_per_expert] * e
        t = sum(counts)
        x = torch.randn(t, k, device=DEV, dtype=BF)
        w_bytes = e * n * k * 2
        nsets = _sets(w_bytes)
        ws = [torch.randn(e, n, k, device=DEV, dtype=BF) * k ** -0.5 for _ in range(nsets)]
        offs = torch.zeros(e + 1, dtype=torch.int64)
        offs[1:] = torch.tensor(counts).cumsum(0)
        offs_dev = offs.to(DEV, torch.int32)
        starts = offs.tolist()
        out = torch.empty(t, n, device=DEV, dtype=BF)

        def ours(i):
            if path == "offsets":
                return bc.grouped_linear(x, ws[i], offsets=offs_dev, out=out, max_rows_per_group=max(counts))
            return bc.grouped_linear(x, ws[i], group_sizes=counts, out=out)

        def theirs(i):
            for j in range(e):
                lo, hi = starts[j], starts[j + 1]
                if hi > lo:
                    torch.matmul(x[lo:hi], ws[i][j].t(), out=out[lo:hi])
            return out

        def check():
            a = ours(0).float().clone()
            b = theirs(0).float()
            return C.rel_err(a, b)

        active = sum(1 for c in counts if c) * n * k * 2
        return ours, theirs, nsets, 2 * t * n * k, active, check

    return make


def cases():
    out = [
        Case("dense/bf16/8192", "dense", dense_case(8192, BF)),
        Case("dense/f16/8192", "dense", dense_case(8192, F16)),
        Case("dense/tf32/8192", "dense", dense_case(8192, F32, tf32=True)),
        Case("linear/tf32+bias/8192x8192->8192", "dense", linear_case(8192, 8192, 8192, F32, bias=True, tf32=True),
             "ours: cuBLAS, then our bias pass"),
        Case("linear/tf32+bias+gelu_tanh/8192x8192->8192", "dense",
             linear_case(8192, 8192, 8192, F32, act="gelu_tanh", tf32=True), "ours: cuBLAS, then our two passes"),
        Case("dense/fp8/8192", "dense", fp8_case(8192, 8192, 8192), "torch._scaled_mm, bf16 out"),
    ]
    for t in (128, 1024, 4096, 16384):
        for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
            out.append(Case(f"llm/bf16/{t}x{k}->{n}", "llm", linear_case(t, n, k)))
    out.append(Case("epilogue/bias+gelu_tanh/8192x4096->14336", "epilogue",
                    linear_case(8192, 14336, 4096, act="gelu_tanh"), "ours fused in cuBLASLt"))
    out.append(Case("epilogue/bias+gelu/8192x4096->14336", "epilogue", linear_case(8192, 14336, 4096, act="gelu"),
                    "erf gelu: ours a second pass"))
    out.append(Case("moe/64x~2tok/4096->2048/offsets", "moe", moe_case(64, 2, 2048, 4096, "offsets"),
                    "one launch; weights GB/s counts experts with tokens"))
    out.append(Case("moe/8x~8tok/4096->14336/offsets", "moe", moe_case(8, 8, 14336, 4096, "offsets")))
    out.append(Case("moe/64x16tok/4096->2048/offsets", "moe", moe_case(64, 16, 2048, 4096, "offsets")))
    out.append(Case("moe/8x512tok/4096->14336/sizes", "moe", moe_case(8, 512, 14336, 4096, "sizes"),
                    "one cuBLASLt GEMM per expert"))
    out.append(Case("moe/64x128tok/4096->2048/sizes", "moe", moe_case(64, 128, 2048, 4096, "sizes")))
    for t in (1, 2, 4, 8, 16):
        for n, k in ((14336, 4096), (4096, 14336), (4096, 4096)):
            out.append(Case(f"decode/bf16/{t}x{k}->{n}", "decode", linear_case(t, n, k)))
    return out


def run_case(c, args, peak):
    r = {"key": c.key, "group": c.group, "note": c.note, "error": None}
    try:
        ours, theirs, nsets, flops, w_bytes, check = c.make()
        r["rel_err"] = check()
        small = flops < 2e10
        inner = 20 if small else 1
        bo = C.GpuBench(ours, nsets, inner=inner, graph=small and not args.no_graph, warmup=args.warmup)
        bt = C.GpuBench(theirs, nsets, inner=inner, graph=small and not args.no_graph, warmup=args.warmup)
        with torch_tf32("tf32" in c.key):
            t = C.measure({"ours": bo, "torch": bt}, iters=args.iters, passes=args.passes)
        r["method"] = bo.method
        for side in ("ours", "torch"):
            s = t[side].median
            r[f"{side}_us"] = s * 1e6
            r[f"{side}_tflops"] = flops / s / 1e12
            if w_bytes:
                r[f"{side}_wgbs"] = w_bytes / s / 1e9
        r["speedup"] = r["torch_us"] / r["ours_us"]
        r["peak_frac"] = r["ours_tflops"] / peak if peak else float("nan")
        dt_tol = 5e-2 if "fp8" in c.key else (2e-2 if "tf32" in c.key else 2e-2)
        r["ok"] = r["rel_err"] <= dt_tol
        del bo, bt
    except Exception as e:  # noqa: BLE001
        r["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        r["ok"] = False
    C.free_memory()
    return r


def _time(fn, iters=20, warmup=3):
    b = C.GpuBench(lambda i: fn(), 1, inner=1, warmup=warmup)
    return C.measure({"x": b}, iters=iters, passes=1)["x"].median


def sweep_algos(iters):
    """Time each of cuBLASLt's heuristic candidates (PlanPreference tuning "algo=<i>") on a few shapes."""
    shapes = [("tf32", 8192, 8192, 8192, F32, True), ("bf16", 8192, 8192, 8192, BF, False),
              ("bf16", 128, 4096, 14336, BF, False), ("bf16", 1024, 4096, 4096, BF, False)]
    for name, m, n, k, dt, tf32 in shapes:
        a = torch.randn(m, k, device=DEV, dtype=dt)
        w = torch.randn(n, k, device=DEV, dtype=dt)
        out = torch.empty(m, n, device=DEV, dtype=dt)
        d = bc.GemmDescriptor(bc.TensorSpec((m, k), bc.dtype(dt)), bc.TensorSpec((k, n), bc.dtype(dt), (1, k)),
                              bc.TensorSpec((m, n), bc.dtype(dt)))
        res = []
        for idx in range(8):
            try:
                plan = bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=tf32, prefer=[bc.Backend.cublaslt],
                                                               tuning=f"algo={idx}"))
                ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
                t = _time(lambda: plan.run(out, a, w.t(), workspace=ws), iters)
                res.append((t, idx, plan.sku.name))
            except Exception as e:  # noqa: BLE001
                res.append((float("inf"), idx, f"{type(e).__name__}: {e}"[:80]))
        for t, idx, sku in sorted(res)[:8]:
            print(f"sweep-algos {name} {m}x{k}->{n} candidate {idx}: {2 * m * n * k / t / 1e12:7.1f} TFLOP/s  {sku}")


def sweep_gemv(iters):
    """Time the decode kernel's splits (PlanPreference tuning "kw=..,rn=..") on the decode shapes (weights
    rotated past L2)."""
    for m in (1, 8, 16):
        for n, k in ((14336, 4096), (4096, 14336), (4096, 4096)):
            nsets = _sets(n * k * 2)
            xs = [torch.randn(m, k, device=DEV, dtype=BF) for _ in range(nsets)]
            ws = [torch.randn(n, k, device=DEV, dtype=BF) for _ in range(nsets)]
            out = torch.empty(m, n, device=DEV, dtype=BF)
            d = bc.GemmDescriptor(bc.TensorSpec((m, k), bc.bfloat16), bc.TensorSpec((k, n), bc.bfloat16, (1, k)),
                                  bc.TensorSpec((m, n), bc.bfloat16))

            def timed(tuning):
                plan = bc.GemmPlan.select(d, bc.PlanPreference(tuning=tuning))
                b = C.GpuBench(lambda i: plan.run(out, xs[i], ws[i].t()), nsets, inner=20, graph=True, warmup=3)
                return C.measure({"x": b}, iters=iters, passes=1)["x"].median

            res = [(timed(f"kw={kw},rn={rn}"), kw, rn) for kw in (1, 2, 4, 8, 16) for rn in (1, 2, 4)]
            t0 = timed("")
            bt = C.GpuBench(lambda i: F.linear(xs[i], ws[i]), nsets, inner=20, graph=True, warmup=3)
            tt = C.measure({"x": bt}, iters=iters, passes=1)["x"].median
            best = sorted(res)[:3]
            print(f"sweep-gemv {m}x{k}->{n}: default {n * k * 2 / t0 / 1e9:.0f} GB/s, torch {n * k * 2 / tt / 1e9:.0f}; best "
                  + ", ".join(f"kw={kw},rn={rn}: {n * k * 2 / t / 1e9:.0f}" for t, kw, rn in best))
            C.free_memory()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default=None, help="regex on row keys")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--passes", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--sweep-algos", action="store_true", help="time cuBLASLt's heuristic candidates and exit")
    ap.add_argument("--sweep-gemv", action="store_true", help="time the decode kernel's splits and exit")
    args, _ = ap.parse_known_args(argv)
    if args.sweep_algos or args.sweep_gemv:
        if args.sweep_algos:
            sweep_algos(args.iters or 10)
        if args.sweep_gemv:
            sweep_gemv(args.iters or 10)
        return 0
    args.iters = args.iters or (10 if args.quick else 30)
    args.passes = args.passes or (1 if args.quick else 2)
    args.warmup = args.warmup if args.warmup is not None else 3
    all_cases = cases()
    if args.list:
        print("\n".join(c.key for c in all_cases))
        return 0
    pat = re.compile(args.rows, re.I) if args.rows else None
    selected = [c for c in all_cases if pat is None or pat.search(c.key)]
    info = C.device_info()
    print(f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}; "
          f"cuBLASLt {bc.gemm_backend_info()['cublaslt_version']}", flush=True)
    copy = C.copy_bandwidth(512 * C.MiB, iters=args.iters, passes=1, warmup=args.warmup)["gbs"]
    print(f"device copy: {copy:.0f} GB/s", flush=True)
    rows, peak = [], None
    t0 = time.perf_counter()
    for c in selected:
        r = run_case(c, args, peak)
        if c.key == "dense/bf16/8192" and not r["error"]:
            peak = r["torch_tflops"]  # the measured dense peak every row is a fraction of
            r["peak_frac"] = r["ours_tflops"] / peak
        rows.append(r)
        if r["error"]:
            print(f"  {c.key:<44} ERROR {r['error']}", flush=True)
        else:
            extra = f"  weights ours {r['ours_wgbs']:.0f} / torch {r['torch_wgbs']:.0f} GB/s" if "ours_wgbs" in r else ""
            print(f"  {c.key:<44} ours {r['ours_tflops']:7.1f} TFLOP/s  torch {r['torch_tflops']:7.1f}  "
                  f"x{r['speedup']:.2f}  err {r['rel_err']:.1e}{'' if r['ok'] else ' FAIL'}{extra}  [{r['method']}]",
                  flush=True)
    elapsed = time.perf_counter() - t0

    headers = ["row", "ours TFLOP/s", "torch TFLOP/s", "ours/torch", "% of dense peak", "weights GB/s ours/torch",
               "rel err", "note"]
    table = []
    for r in rows:
        if r["error"]:
            table.append([r["key"], "ERROR", "", "", "", "", "", r["error"]])
            continue
        wg = f"{r['ours_wgbs']:.0f} / {r['torch_wgbs']:.0f}" if "ours_wgbs" in r else "-"
        table.append([r["key"], f"{r['ours_tflops']:.1f}", f"{r['torch_tflops']:.1f}", f"{r['speedup']:.2f}x",
                      C.fmt(100 * r["peak_frac"], ".0f"), wg, f"{r['rel_err']:.1e}" + ("" if r["ok"] else " FAIL"),
                      r["note"]])
    head = (f"GPU: {info['name']}; torch {info['torch']}; dense peak = torch bf16 8192^3 in this run "
            f"({C.fmt(peak, '.0f')} TFLOP/s); device copy {copy:.0f} GB/s; {elapsed:.0f} s")
    md = head + "\n\n" + C.markdown_table(headers, table) + "\n"
    txt = head + "\n" + C.text_table(headers, table) + "\n"
    C.write_outputs("bench_gemm", md, {"device": info, "rows": rows, "copy_gbs": copy, "peak_tflops": peak}, txt)
    print(txt)
    return 0 if all(r["ok"] for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
