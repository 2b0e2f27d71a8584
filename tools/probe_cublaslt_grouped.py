#!/usr/bin/env python3
"""Probe: does the cuBLASLt that torch loads run the experimental grouped mode (CUBLASLT_BATCH_MODE_GROUPED:
per-group rows / columns / leading dimensions and pointers read from device arrays), and how fast is it for a
MoE projection next to torch's loop and torch._grouped_mm? ctypes only, no build.

    python3 tools/probe_cublaslt_grouped.py
"""
from __future__ import annotations

import ctypes
import glob
import os

import torch

torch.cuda.init()
import nvidia  # noqa: E402

libs = [p for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "*", "lib", "libcublasLt.so.*"))]
print("cublasLt candidates:", libs)
lt = ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)
print("version", lt.cublasLtGetVersion())
for sym in ("cublasLtGroupedMatrixLayoutCreate", "cublasLtGroupedMatrixLayoutInit_internal"):
    print(sym, hasattr(lt, sym))

vp = ctypes.c_void_p


def ok(s, what):
    if s != 0:
        raise RuntimeError(f"{what}: status {s}")


h = vp()
ok(lt.cublasLtCreate(ctypes.byref(h)), "create")
R16BF, R32F, C32F = 14, 0, 68


def set_attr(fn, obj, attr, value, ctype):
    v = ctype(value)
    ok(fn(obj, ctypes.c_int(attr), ctypes.byref(v), ctypes.c_size_t(ctypes.sizeof(v))), f"set attr {attr}")


class Heur(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("ws", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * reps)]
    ts = []
    for i in range(reps):
        ev[2 * i].record()
        fn()
        ev[2 * i + 1].record()
    torch.cuda.synchronize()
    ts = sorted(ev[2 * i].elapsed_time(ev[2 * i + 1]) * 1e3 for i in range(reps))
    return ts[reps // 2]


def probe(T, N, K, E, width64):
    torch.manual_seed(0)
    sizes = torch.distributions.Dirichlet(torch.ones(E)).sample() * T
    sizes = sizes.round().long()
    sizes[-1] = T - sizes[:-1].sum()
    sizes = sizes.clamp(min=0)
    T = int(sizes.sum())
    offs = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)]).cuda()
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    it = torch.int64 if width64 else torch.int32
    # column-major view: D (N x M_e, ld N) = A^T (A: K x N, ld K) * B (B: K x M_e, ld K)
    m = (offs[1:] - offs[:-1]).to(it)
    a_rows = torch.full((E,), K, device="cuda", dtype=it)
    a_cols = torch.full((E,), N, device="cuda", dtype=it)
    a_ld = torch.full((E,), K, device="cuda", dtype=it)
    b_rows, b_cols, b_ld = a_rows, m, a_ld
    d_rows, d_cols, d_ld = a_cols, m, torch.full((E,), N, device="cuda", dtype=it)
    ap = torch.tensor([w[e].data_ptr() for e in range(E)], device="cuda", dtype=torch.int64)
    starts = offs[:-1]
    bp = x.data_ptr() + starts * K * 2
    dp = out.data_ptr() + starts * N * 2

    def layout(rows, cols, ld):
        L = vp()
        ok(lt.cublasLtGroupedMatrixLayoutCreate(ctypes.byref(L), R16BF, E, vp(rows.data_ptr()), vp(cols.data_ptr()),
                                                   vp(ld.data_ptr())), "grouped layout")
        if width64:
            set_attr(lt.cublasLtMatrixLayoutSetAttribute, L, 12, 1, ctypes.c_int32)
            set_attr(lt.cublasLtMatrixLayoutSetAttribute, L, 13, 1, ctypes.c_int32)
        return L

    A, B, D = layout(a_rows, a_cols, a_ld), layout(b_rows, b_cols, b_ld), layout(d_rows, d_cols, d_ld)
    desc = vp()
    ok(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), C32F, R32F), "desc")
    set_attr(lt.cublasLtMatmulDescSetAttribute, desc, 3, 1, ctypes.c_int32)  # TRANSA = T
    pref = vp()
    ok(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "pref")
    ws_bytes = 64 << 20
    set_attr(lt.cublasLtMatmulPreferenceSetAttribute, pref, 1, ws_bytes, ctypes.c_uint64)
    set_attr(lt.cublasLtMatmulPreferenceSetAttribute, pref, 13, K, ctypes.c_uint32)
    set_attr(lt.cublasLtMatmulPreferenceSetAttribute, pref, 14, N, ctypes.c_uint32)
    set_attr(lt.cublasLtMatmulPreferenceSetAttribute, pref, 15, max(1, T // E), ctypes.c_uint32)
    res = (Heur * 8)()
    cnt = ctypes.c_int(0)
    s = lt.cublasLtMatmulAlgoGetHeuristic(h, desc, A, B, D, D, pref, 8, res, ctypes.byref(cnt))
    print(f"T{T} N{N} K{K} E{E} int{'64' if width64 else '32'}: heuristic status {s}, {cnt.value} algos, "
          f"ws {[res[i].ws for i in range(cnt.value)]}")
    if s != 0 or cnt.value == 0:
        return
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device="cuda")
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    stream = vp(torch.cuda.current_stream().cuda_stream)

    def run(i=0):
        ok(lt.cublasLtMatmul(h, desc, ctypes.byref(alpha), vp(ap.data_ptr()), A, vp(bp.data_ptr()), B,
                             ctypes.byref(beta), vp(dp.data_ptr()), D, vp(dp.data_ptr()), D, ctypes.byref(res[i].algo),
                             vp(ws.data_ptr()), ctypes.c_size_t(ws_bytes), stream), "matmul")

    out.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    ref = torch.cat([x[offs[e]:offs[e + 1]].float() @ w[e].float().t() for e in range(E)])
    err = (out.float() - ref).abs().max().item()
    flop = 2.0 * T * N * K
    ours = timed(run)
    cpu_offs = offs.tolist()

    def loop():
        for e in range(E):
            torch.matmul(x[cpu_offs[e]:cpu_offs[e + 1]], w[e].t(), out=out[cpu_offs[e]:cpu_offs[e + 1]])

    tl = timed(loop)
    line = (f"  grouped {ours:.1f} us ({flop / ours / 1e6:.0f} TFLOP/s), err {err:.3g}; torch loop {tl:.1f} us "
            f"({flop / tl / 1e6:.0f})")
    if hasattr(torch, "_grouped_mm"):
        o32 = offs[1:].to(torch.int32)
        wt = w.transpose(1, 2)
        try:
            g = torch._grouped_mm(x, wt, offs=o32)
            gerr = (g.float() - ref).abs().max().item()
            tg = timed(lambda: torch._grouped_mm(x, wt, offs=o32))
            line += f"; torch._grouped_mm {tg:.1f} us ({flop / tg / 1e6:.0f}), err {gerr:.3g}"
        except Exception as e:  # noqa: BLE001
            line += f"; torch._grouped_mm failed: {e}"
    print(line)
    for i in range(1, cnt.value):
        try:
            print(f"  algo {i}: {timed(lambda: run(i)):.1f} us")
        except RuntimeError as e:
            print(f"  algo {i}: {e}")


for args in ((8192, 14336 * 2, 4096, 8), (8192, 4096, 14336, 8), (128, 14336 * 2, 4096, 8), (4096, 5632 * 2, 2048, 8),
             (8192, 2048, 7168, 64)):
    for w64 in (False, True):
        try:
            probe(*args, w64)
        except Exception as e:  # noqa: BLE001
            print(args, w64, "failed:", e)
