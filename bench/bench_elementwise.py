#!/usr/bin/env python3
"""Elementwise family: baracuda against torch, same shapes, same dtype, same work, same timer, same run.

    python3 bench/bench_elementwise.py            # full run: 100 samples x 2 interleaved passes per side
    python3 bench/bench_elementwise.py --quick    # smoke run: fewer samples, one pass
    python3 bench/bench_elementwise.py --rows 'silu|cast'   # regex on the row keys (see --list)
    OUT=/tmp/out python3 bench/bench_elementwise.py   # also $OUT/bench_elementwise.{md,json,txt}

Ours runs through the plan API (plan selected once, `plan.run(out, *inputs)` timed); one row times
the functional path (`bc.silu(x, out=y)`) on the same shape. Bandwidth counts each operand once
(bytes read + bytes written) and is also given as a fraction of the device-to-device copy bandwidth
measured at the start of the run. Method: docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
BF, F16, F32 = torch.bfloat16, torch.float16, torch.float32
FP8 = getattr(torch, "float8_e4m3fn", None)
aten = torch.ops.aten

# Tolerance of ||ours - torch|| / ||torch|| per output dtype. Both sides compute in f32 and round
# once for plain maps; torch rounds twice in the composed rows (swiglu, mul_backward's sum), hence
# the bf16 slack. The precision of each op against float64 is the tests' business, not this file's.
TOL = {BF: 2e-2, F16: 5e-3, F32: 1e-5, torch.bool: 0.0}
if FP8 is not None:
    TOL[FP8] = 1e-6

SHORT = {BF: "bf16", F16: "f16", F32: "f32", torch.bool: "bool"}
if FP8 is not None:
    SHORT[FP8] = "e4m3"


def rnd(shape, dt):
    return torch.randn(shape, device=DEV, dtype=dt)


def rbool(shape):
    return torch.rand(shape, device=DEV) > 0.5


def emp(shape, dt):
    return torch.empty(shape, device=DEV, dtype=dt)


def spec(t: torch.Tensor):
    """The TensorSpec of a torch tensor, strides included (views keep theirs)."""
    return bc.TensorSpec(tuple(int(s) for s in t.shape), bc.dtype(t.dtype), [int(s) for s in t.stride()])


def storage_bytes(ts) -> int:
    """Bytes of the distinct storages behind `ts` (a view counts its whole base)."""
    seen, total = set(), 0
    for t in ts:
        st = t.untyped_storage()
        key = st.data_ptr()
        if key not in seen:
            seen.add(key)
            total += st.nbytes()
    return total


def size_label(numel: int) -> str:
    """64Mi, 256Ki, 1000 ... (elements), for row keys."""
    for unit, name in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if numel >= unit and numel % unit == 0:
            return f"{numel // unit}{name}"
    return str(numel)


def sx(shape) -> str:
    return "x".join(str(int(s)) for s in shape)


# ---- cases ---------------------------------------------------------------------------------------
@dataclass
class Prepared:
    """One row, allocated: `nsets` buffer sets, ours(i) and the torch candidates' fn(i) on set i."""
    nsets: int
    ours: Callable[[int], object]
    torch_impls: list            # [(label, fn(i) -> result tensor or tuple of tensors)], first that runs wins
    outputs: Callable[[int], tuple]  # ours' output tensors of set i (poisoned before the check)
    sku: str
    nbytes: int
    extra: dict = field(default_factory=dict)
    keep: object = None          # the buffers


@dataclass
class Case:
    key: str                     # what --rows matches
    op: str                      # table label
    dtype: str
    shape: str
    build: Callable[[], Prepared]
    tol: float
    small: bool = False          # time as CUDA-graph replays of a batch (launch gaps would dominate)


def _nsets_and_sets(make):
    """Allocate enough buffer sets that the bytes between two uses of one set exceed 3 x L2."""
    first = make()
    nsets = C.rotation_sets(storage_bytes(list(_flatten(first))))
    return nsets, [first] + [make() for _ in range(nsets - 1)]


def _flatten(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)


def map_case(key, op, dtype, shape, make, torch_impls, *, bc_op, tol, params=None, nbytes=None,
             small=False, functional=None) -> Case:
    """A single-output op. make() -> (inputs list, out tensor) of fresh random data.
    torch_impls: [(label, fn(inputs, out) -> result)]. functional: fn(inputs, out) timed instead of
    plan.run (the plan is still selected, for the sku column)."""

    def build() -> Prepared:
        nsets, sets = _nsets_and_sets(make)
        ins0, out0 = sets[0]
        plan = bc.ElementwisePlan.select(
            bc.ElementwiseDescriptor(bc_op, [spec(t) for t in ins0], spec(out0), dict(params or {})))
        if functional is None:
            def ours(i):
                ins, out = sets[i]
                plan.run(out, *ins)
            sku = plan.sku.name
        else:
            def ours(i):
                ins, out = sets[i]
                functional(ins, out)
            sku = "functional: " + plan.sku.name

        impls = [(label, (lambda f: (lambda i: f(sets[i][0], sets[i][1])))(f)) for label, f in torch_impls]
        nb = nbytes if nbytes is not None else sum(C.nbytes(t) for t in ins0) + C.nbytes(out0)
        return Prepared(nsets, ours, impls, lambda i: (sets[i][1],), sku, int(nb),
                        extra={"layout": plan.sku.layout, "workspace_bytes": plan.workspace_bytes(),
                               "precision": plan.sku.precision.math}, keep=sets)

    return Case(key, op, dtype, shape, build, tol, small)


def mul_backward_case(S, *, wrt_b_only: bool) -> Case:
    """d(a*b) with b (C,) broadcast over a (N, C): grad_a = g*b (full), grad_b = sum_0(g*a) (reduced).
    Ours: two plans (wrt=0 and wrt=1, the latter with its workspace); torch: what autograd runs."""

    def make():
        return rnd((S, S), BF), rnd((S, S), BF), rnd((S,), BF), emp((S, S), BF), emp((S,), BF)

    def build() -> Prepared:
        nsets, sets = _nsets_and_sets(make)
        g0, a0, b0, ga0, gb0 = sets[0]
        ins = [spec(g0), spec(a0), spec(b0)]
        plan_a = bc.ElementwisePlan.select(bc.ElementwiseDescriptor("mul_backward", ins, spec(ga0), {"wrt": 0.0}))
        plan_b = bc.ElementwisePlan.select(bc.ElementwiseDescriptor("mul_backward", ins, spec(gb0), {"wrt": 1.0}))
        wsb = plan_b.workspace_bytes()
        ws = torch.empty(wsb, device=DEV, dtype=torch.uint8) if wsb > 0 else None
        extra = {"workspace_bytes": wsb, "precision": plan_b.sku.precision.math}
        if wrt_b_only:
            def ours(i):
                g, a, b, ga, gb = sets[i]
                plan_b.run(gb, g, a, b, workspace=ws)

            def t_out(i):
                g, a, b, ga, gb = sets[i]
                return torch.sum(g * a, 0, out=gb)

            def t_alloc(i):
                g, a, b, ga, gb = sets[i]
                return (g * a).sum(0)

            impls = [("torch.sum(g*a, 0, out=gb)", t_out), ("(g*a).sum(0)", t_alloc)]
            outputs = lambda i: (sets[i][4],)  # noqa: E731
            nb = C.nbytes(g0) + C.nbytes(a0) + C.nbytes(gb0)
            sku = plan_b.sku.name
        else:
            def ours(i):
                g, a, b, ga, gb = sets[i]
                plan_a.run(ga, g, a, b)
                plan_b.run(gb, g, a, b, workspace=ws)

            def t_out(i):
                g, a, b, ga, gb = sets[i]
                return torch.mul(g, b, out=ga), torch.sum(g * a, 0, out=gb)

            def t_alloc(i):
                g, a, b, ga, gb = sets[i]
                return g * b, (g * a).sum(0)

            impls = [("mul(g,b,out=) + sum(g*a,0,out=)", t_out), ("g*b, (g*a).sum(0)", t_alloc)]
            outputs = lambda i: (sets[i][3], sets[i][4])  # noqa: E731
            nb = sum(C.nbytes(t) for t in (g0, a0, b0, ga0, gb0))
            sku = plan_a.sku.name + " + " + plan_b.sku.name
        return Prepared(nsets, ours, impls, outputs, sku, int(nb), extra=extra, keep=(sets, ws))

    if wrt_b_only:
        return Case(f"backward/mul_backward_wrt_b/bf16/{size_label(S * S)}", "mul_backward grad_b only", "bf16",
                    f"g,a {S}x{S}; b {S}", build, TOL[BF])
    return Case(f"backward/mul_backward/bf16/{size_label(S * S)}", "mul_backward (a, b bcast)", "bf16",
                f"g,a {S}x{S}; b {S}", build, TOL[BF])


def cases(S: int) -> list:
    out = []

    def unary(key, op, dt, shape, torch_impls, *, small=False, functional=None, label=None):
        out.append(map_case(key, label or op, SHORT[dt], sx(shape),
                            lambda: ([rnd(shape, dt)], emp(shape, dt)), torch_impls,
                            bc_op=op, tol=TOL[dt], small=small, functional=functional))

    silu_t = [("aten.silu.out", lambda ins, y: aten.silu.out(ins[0], out=y)),
              ("F.silu", lambda ins, y: F.silu(ins[0]))]
    gelu_t = [("aten.gelu.out", lambda ins, y: aten.gelu.out(ins[0], out=y)),
              ("F.gelu", lambda ins, y: F.gelu(ins[0]))]
    exp_t = [("torch.exp(out=)", lambda ins, y: torch.exp(ins[0], out=y))]

    n64 = size_label(S * S)
    # -- contiguous unary
    unary(f"unary/silu/bf16/{n64}", "silu", BF, (S, S), silu_t)
    unary(f"unary/silu/bf16/{n64}/functional", "silu", BF, (S, S), silu_t,
          functional=lambda ins, y: bc.silu(ins[0], out=y), label="silu [bc.silu(x, out=y)]")
    unary("unary/silu/bf16/16MiB", "silu", BF, (4096, 2048), silu_t, small=True)
    unary("unary/silu/bf16/1MiB", "silu", BF, (512, 1024), silu_t, small=True)
    unary(f"unary/gelu/bf16/{n64}", "gelu", BF, (S, S), gelu_t)
    unary(f"unary/exp/f32/{n64}", "exp", F32, (S, S), exp_t)

    # -- binary, contiguous
    def binary(key, op, dt, sa, sb, torch_fn, label=None, shape_label=None, category="binary"):
        so = torch.broadcast_shapes(sa, sb)
        odt = torch.bool if category == "compare" else dt
        out.append(map_case(key, label or op, SHORT[dt], shape_label or sx(so),
                            lambda: ([rnd(sa, dt), rnd(sb, dt)], emp(so, odt)),
                            [(f"torch.{torch_fn.__name__}(out=)", lambda ins, y: torch_fn(ins[0], ins[1], out=y))],
                            bc_op=op, tol=TOL[odt]))

    binary(f"binary/add/bf16/{n64}", "add", BF, (S, S), (S, S), torch.add)
    binary(f"binary/mul/f32/{n64}", "mul", F32, (S, S), (S, S), torch.mul)
    binary(f"binary/add/f16/{n64}", "add", F16, (S, S), (S, S), torch.add)

    # -- casts (torch: dst.copy_(src), the kernel .to() runs, without the allocation)
    def cast(src, dst):
        name = f"cast {SHORT[src]}->{SHORT[dst]}"
        out.append(map_case(f"cast/{SHORT[src]}-{SHORT[dst]}/{n64}", name, f"{SHORT[src]}->{SHORT[dst]}",
                            sx((S, S)), lambda: ([rnd((S, S), src)], emp((S, S), dst)),
                            [("dst.copy_(src)", lambda ins, y: y.copy_(ins[0])),
                             (f"src.to({SHORT[dst]})", lambda ins, y: ins[0].to(dst))],
                            bc_op="cast", tol=TOL[dst]))

    cast(BF, F32)
    cast(F32, BF)
    if FP8 is not None:
        cast(F32, FP8)

    # -- compare, where
    binary(f"compare/lt/f32/{n64}", "lt", F32, (S, S), (S, S), torch.lt, label="lt (bool out)", category="compare")
    out.append(map_case(f"ternary/where/bf16/{n64}", "where", "bf16", sx((S, S)),
                        lambda: ([rbool((S, S)), rnd((S, S), BF), rnd((S, S), BF)], emp((S, S), BF)),
                        [("torch.where(out=)", lambda ins, y: torch.where(ins[0], ins[1], ins[2], out=y)),
                         ("torch.where", lambda ins, y: torch.where(ins[0], ins[1], ins[2]))],
                        bc_op="where", tol=TOL[BF]))

    # -- gated: swiglu over the last axis, x (S, S) -> (S, S/2)
    h = S // 2
    out.append(map_case(f"gated/swiglu/bf16/{n64}", "swiglu", "bf16", f"{S}x{S} -> {S}x{h}",
                        lambda: ([rnd((S, S), BF)], emp((S, h), BF)),
                        [("mul(F.silu(x[..,:h]), x[..,h:], out=)",
                          lambda ins, y: torch.mul(F.silu(ins[0][..., :h]), ins[0][..., h:], out=y)),
                         ("F.silu(x[..,:h]) * x[..,h:]", lambda ins, y: F.silu(ins[0][..., :h]) * ins[0][..., h:])],
                        bc_op="swiglu", tol=TOL[BF]))

    # -- swiglu from the two projections (gate, up) -> silu(gate) * up, one fused kernel
    out.append(map_case(f"binary/silu_mul/bf16/{n64}", "silu_mul (swiglu(gate, up))", "bf16", sx((S, S)),
                        lambda: ([rnd((S, S), BF), rnd((S, S), BF)], emp((S, S), BF)),
                        [("mul(F.silu(gate), up, out=)", lambda ins, y: torch.mul(F.silu(ins[0]), ins[1], out=y)),
                         ("F.silu(gate) * up", lambda ins, y: F.silu(ins[0]) * ins[1])],
                        bc_op="silu_mul", tol=TOL[BF]))

    # -- strided inputs into a contiguous output
    out.append(map_case(f"strided/silu_transposed/bf16/{n64}", "silu x.t()", "bf16", f"{S}x{S} (x.t())",
                        lambda: ([rnd((S, S), BF).t()], emp((S, S), BF)), silu_t, bc_op="silu", tol=TOL[BF]))
    # x[:, ::2]: every 32-byte sector of the parent holds used elements, so the input counts as the
    # whole parent (S x 2S); the output as S x S.
    out.append(map_case(f"strided/silu_slice2/bf16/{n64}", "silu x[:, ::2]", "bf16", f"{S}x{2 * S}[:, ::2]",
                        lambda: ([rnd((S, 2 * S), BF)[:, ::2]], emp((S, S), BF)), silu_t, bc_op="silu",
                        tol=TOL[BF], nbytes=S * 2 * S * 2 + S * S * 2))

    # -- broadcast
    binary(f"broadcast/add_bias/bf16/{n64}", "add", BF, (S, S), (S,), torch.add, label="add bias",
           shape_label=f"{S}x{S} + {S}")
    binary(f"broadcast/mul_outer/bf16/{n64}", "mul", BF, (S, 1), (1, S), torch.mul, label="mul outer",
           shape_label=f"{S}x1 * 1x{S}")

    # -- backward
    out.append(map_case(f"backward/silu_backward/bf16/{n64}", "silu_backward", "bf16", sx((S, S)),
                        lambda: ([rnd((S, S), BF), rnd((S, S), BF)], emp((S, S), BF)),
                        [("aten.silu_backward.grad_input",
                          lambda ins, y: aten.silu_backward.grad_input(ins[0], ins[1], grad_input=y)),
                         ("aten.silu_backward", lambda ins, y: aten.silu_backward(ins[0], ins[1]))],
                        bc_op="silu_backward", tol=TOL[BF]))
    out.append(mul_backward_case(S, wrt_b_only=False))
    out.append(mul_backward_case(S, wrt_b_only=True))
    return out


# ---- running one row -----------------------------------------------------------------------------
def _as_list(r):
    if r is None:
        return None
    if isinstance(r, torch.Tensor):
        return [r]
    return list(r)


def run_case(case: Case, args, copy_gbs: float) -> dict:
    row = {"key": case.key, "op": case.op, "dtype": case.dtype, "shape": case.shape, "sku": "-", "tol": case.tol,
           "error": None, "torch_error": None, "rel_err": None, "ok": False}
    try:
        _run_case(case, args, copy_gbs, row)  # every buffer of the row dies with this frame
    except Exception as e:  # noqa: BLE001  (one broken row must not hide the others)
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()
    try:
        C.free_memory()
    except Exception:  # noqa: BLE001
        pass
    return row


def _run_case(case: Case, args, copy_gbs: float, row: dict):
    """Fills `row`: correctness check against torch, then the interleaved timing."""
    prep = case.build()
    row.update(sku=prep.sku, nbytes=prep.nbytes, nsets=prep.nsets, **prep.extra)

    # Correctness first: poisoned outputs, fresh random inputs, ours against torch.
    outs = prep.outputs(0)
    for o in outs:
        C.poison_(o)
    prep.ours(0)
    torch.cuda.synchronize()
    ours_res = [o.clone() for o in outs]
    torch_fn, errs = None, []
    for label, fn in prep.torch_impls:
        try:
            ref = _as_list(fn(0))
            torch.cuda.synchronize()
            if ref is None or len(ref) != len(ours_res):
                raise RuntimeError(f"returned {type(ref).__name__}")
            row["rel_err"] = max(C.rel_err(g, r) for g, r in zip(ours_res, ref))
            torch_fn = fn
            row["torch_impl"] = label
            break
        except Exception as e:  # noqa: BLE001  (try the next torch spelling)
            errs.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    del ours_res
    if torch_fn is None:
        row["torch_error"] = "; ".join(errs) or "no torch implementation"
    err = row["rel_err"]
    row["ok"] = err is not None and not math.isnan(err) and err <= case.tol

    # Timing: same timer, interleaved passes.
    if case.small:
        inner = prep.nsets * max(1, math.ceil(32 / prep.nsets))
        kw = dict(inner=inner, graph=not args.no_graph, warmup=args.warmup)
    else:
        kw = dict(inner=1, graph=False, warmup=args.warmup)
    benches = {"ours": C.GpuBench(prep.ours, prep.nsets, **kw)}
    if torch_fn is not None:
        benches["torch"] = C.GpuBench(torch_fn, prep.nsets, **kw)
    t = C.measure(benches, iters=args.iters, passes=args.passes)
    row["ours"] = t["ours"].to_json()
    row["ours_gbs"] = prep.nbytes / t["ours"].median / 1e9
    row["ours_pct_copy"] = row["ours_gbs"] / copy_gbs
    row["method"] = t["ours"].method
    if "torch" in t:
        row["torch"] = t["torch"].to_json()
        row["torch_gbs"] = prep.nbytes / t["torch"].median / 1e9
        row["torch_pct_copy"] = row["torch_gbs"] / copy_gbs
        row["speedup"] = row["ours_gbs"] / row["torch_gbs"]
        row["torch_method"] = t["torch"].method
    spreads = [x.pass_spread for x in t.values() if not math.isnan(x.pass_spread)]
    row["noise"] = max(spreads) if spreads else float("nan")


def host_overhead(args) -> dict:
    x = torch.randn(1024, device=DEV)
    y = torch.empty_like(x)
    plan = bc.ElementwisePlan.select(bc.ElementwiseDescriptor("exp", [spec(x)], spec(y)))
    s = torch.cuda.current_stream().cuda_stream
    calls = {
        "plan.run(y, x)": (plan.run, (y, x), {}),
        "plan.run(y, x, stream=int)": (plan.run, (y, x), {"stream": s}),
        "bc.exp(x, out=y)": (bc.exp, (x,), {"out": y}),
        "torch.exp(x, out=y)": (torch.exp, (x,), {"out": y}),
        "python call of a no-op (loop floor)": (_noop, (y, x), {}),
    }
    res = C.time_host(calls, n=args.host_n, reps=args.host_reps)
    return {"n": args.host_n, "reps": args.host_reps, "numel": 1024, "dtype": "f32", "target_us": 5.0,
            "calls": res}


def _noop(*a, **k):
    return None


# ---- main ----------------------------------------------------------------------------------------
HEADERS = ["op", "dtype", "shape", "sku", "ours us", "torch us", "ours GB/s", "torch GB/s",
           "ours/torch", "%copy", "noise", "check"]
MD_HEADERS = ["op", "dtype", "shape", "sku (ours)", "torch impl", "ours us", "torch us", "ours GB/s", "torch GB/s",
              "ours/torch", "ours % copy", "torch % copy", "noise", "rel err", "timing"]


def _check_cell(r) -> str:
    if r.get("error"):
        return "ERROR"
    if r.get("rel_err") is None:
        return "no ref"
    e = r["rel_err"]
    return ("ok " if r["ok"] else "FAIL ") + C.fmt(e, ".1e")


def _cells(r, md: bool):
    o = r.get("ours", {}).get("median_us")
    t = r.get("torch", {}).get("median_us")
    pct = lambda v: C.fmt(None if v is None else 100 * v, ".0f") + ("%" if v is not None else "")  # noqa: E731
    noise = r.get("noise")
    common = [C.fmt(o, ".1f"), C.fmt(t, ".1f"), C.fmt(r.get("ours_gbs"), ".0f"), C.fmt(r.get("torch_gbs"), ".0f"),
              C.fmt(r.get("speedup"), ".2f") + ("x" if r.get("speedup") is not None else "")]
    if not md:
        sku = r["sku"].replace("functional: ", "fn: ").replace("ew.", "")
        return [r["op"], r["dtype"], r["shape"], sku, *common, pct(r.get("ours_pct_copy")),
                pct(noise) if noise is not None and not math.isnan(noise) else "-", _check_cell(r)]
    timpl = r.get("torch_impl") or ("ERROR: " + r["torch_error"][:60] if r.get("torch_error") else "-")
    return [r["op"], r["dtype"], r["shape"], r["sku"], timpl, *common,
            pct(r.get("ours_pct_copy")), pct(r.get("torch_pct_copy")),
            pct(noise) if noise is not None and not math.isnan(noise) else "-",
            C.fmt(r.get("rel_err"), ".1e"), r.get("method", "-")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 samples, one pass, short host loop")
    ap.add_argument("--rows", default=None, help="regex (case-insensitive) on row keys; see --list. "
                                                 "The host-overhead section has the key 'host/exp/f32/1024'.")
    ap.add_argument("--list", action="store_true", help="print the row keys and exit")
    ap.add_argument("--iters", type=int, default=None, help="samples per pass (default 100, quick 20)")
    ap.add_argument("--passes", type=int, default=None, help="interleaved passes (default 2, quick 1)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up calls (default 10, quick 3)")
    ap.add_argument("--side", type=int, default=8192, help="main rows are side x side (default 8192: 64 Mi elements)")
    ap.add_argument("--host-n", type=int, default=None, help="calls per host-overhead repetition (default 10000)")
    ap.add_argument("--host-reps", type=int, default=None, help="host-overhead repetitions (default 5, quick 3)")
    ap.add_argument("--no-graph", action="store_true", help="time small rows with events around a batch, no graph")
    ap.add_argument("--seed", type=int, default=None, help="torch seed (default: drawn from os.urandom, printed)")
    args = ap.parse_args(argv)
    args.iters = args.iters or (20 if args.quick else 100)
    args.passes = args.passes or (1 if args.quick else 2)
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 10)
    args.host_n = args.host_n or (2000 if args.quick else 10000)
    args.host_reps = args.host_reps or (3 if args.quick else 5)

    all_cases = cases(args.side)
    host_key = "host/exp/f32/1024"
    if args.list:
        for c in all_cases:
            print(c.key)
        print(host_key)
        return 0
    pat = re.compile(args.rows, re.I) if args.rows else None
    selected = [c for c in all_cases if pat is None or pat.search(c.key)]
    want_host = pat is None or bool(pat.search(host_key))

    if not torch.cuda.is_available():
        print("bench_elementwise: torch sees no CUDA device", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    info = C.device_info()
    binfo = bc.build_info()
    print(f"GPU: {info['name']} (sm_{info['sm'].replace('.', '')}, {info['multiprocessors']} SMs, "
          f"L2 {info['l2_bytes'] / C.MiB:.0f} MiB, {info['total_memory_gib']} GiB)")
    print(f"torch {info['torch']} (CUDA {info['torch_cuda']}), baracuda {bc.__version__} "
          f"(archs {binfo['cuda_archs']}), seed {seed}, iters {args.iters} x {args.passes} pass(es)")
    print(f"rows: {len(selected)} of {len(all_cases)}" + (f" (--rows {args.rows!r})" if pat else ""), flush=True)

    copy, copy_gbs = None, float("nan")
    if selected:  # the reference every row's "% copy" is taken against
        copy = C.copy_bandwidth(512 * C.MiB, iters=args.iters, passes=args.passes, warmup=args.warmup)
        copy_gbs = copy["gbs"]
        spread = copy["timing"].pass_spread
        print(f"device copy (torch copy_, 512 MiB, read + write): {copy_gbs:.0f} GB/s"
              + ("" if math.isnan(spread) else f" (noise {100 * spread:.1f}%)"), flush=True)

    rows = []
    t_start = time.perf_counter()
    for c in selected:
        r = run_case(c, args, copy_gbs)
        rows.append(r)
        if r["error"]:
            print(f"  {c.key:<44} ERROR {r['error']}", flush=True)
        else:
            print(f"  {c.key:<44} ours {C.fmt(r.get('ours_gbs'), '.0f'):>5} GB/s  torch "
                  f"{C.fmt(r.get('torch_gbs'), '.0f'):>5} GB/s  {_check_cell(r)}  [{r.get('method')}]"
                  + (f"  torch: {r['torch_error']}" if r.get("torch_error") else ""), flush=True)

    host = None
    if want_host:
        try:
            host = host_overhead(args)
        except Exception as e:  # noqa: BLE001
            host = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}

    copy_end = None
    if rows:
        copy_end = C.copy_bandwidth(512 * C.MiB, iters=args.iters, passes=1, warmup=args.warmup)["gbs"]
    elapsed = time.perf_counter() - t_start

    # ---- report
    head = (f"GPU: {info['name']}; torch {info['torch']} (CUDA {info['torch_cuda']}); baracuda {bc.__version__} "
            f"(archs {binfo['cuda_archs']})\n"
            f"device copy bandwidth: {C.fmt(copy_gbs, '.0f')} GB/s at the start"
            + (f", {copy_end:.0f} GB/s at the end" if copy_end else "") + "; "
            f"median of {args.iters} x {args.passes} samples; seed {seed}")
    table = C.text_table(HEADERS, [_cells(r, md=False) for r in rows]) if rows else "(no rows selected)"
    host_rows = []
    if host and "calls" in host:
        for name, v in host["calls"].items():
            target = ""
            if name.startswith("plan.run(y, x)"):
                target = "ok (<= 5 us)" if v["us_per_call"] <= 5.0 else "OVER 5 us target"
            host_rows.append([name, C.fmt(v["us_per_call"], ".2f"), target])
    host_hdr = ["call (1024 f32, back-to-back, one sync)", "us/call", "target"]

    md = ["# Elementwise: baracuda vs torch", "", head.replace("\n", "  \n"), "",
          "Bandwidth = (bytes read + bytes written, each operand once) / median time; "
          "ours/torch > 1 means ours is faster; noise = spread of the per-pass medians.", ""]
    md.append(C.markdown_table(MD_HEADERS, [_cells(r, md=True) for r in rows]) if rows else "(no rows selected)")
    errs = [r for r in rows if r.get("error")]
    if errs:
        md += ["", "Errors:", ""] + [f"- `{r['key']}`: {r['error']}" for r in errs]
    if host_rows:
        md += ["", f"## Host overhead ({host['n']} calls x {host['reps']} reps, median)", "",
               C.markdown_table(host_hdr, host_rows)]
    elif host and host.get("error"):
        md += ["", f"Host overhead: ERROR {host['error']}"]
    data = {"device": info, "baracuda": {"version": bc.__version__, **{k: v for k, v in binfo.items()}},
            "seed": seed, "args": vars(args), "copy_gbs": copy_gbs, "copy_gbs_end": copy_end,
            "copy_timing": copy["timing"] if copy else None, "rows": rows, "host_overhead": host, "elapsed_s": elapsed}
    text = [head, table]
    if host_rows:
        text += ["", C.text_table(host_hdr, host_rows, right={1})]
    elif host and host.get("error"):
        text.append(f"host overhead: ERROR {host['error']}")
    bad = [r["key"] for r in rows if r.get("error") or not r.get("ok")]
    if bad:
        text.append(f"{len(bad)} row(s) with an error or a failed check: {', '.join(bad)}")
    paths = C.write_outputs("bench_elementwise", "\n".join(md), data, text="\n".join(text))

    print()
    print("\n".join(text))
    if paths:
        print("wrote " + ", ".join(paths))
    host_bad = host is not None and "error" in host
    return 3 if bad or host_bad else 0  # 3, not 1: 1 is what an uncaught exception exits with


if __name__ == "__main__":
    sys.exit(main())
