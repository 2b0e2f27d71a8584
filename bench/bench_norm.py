#!/usr/bin/env python3
"""Norm family (RMSNorm, LayerNorm; forward, fused residual, backward; GroupNorm, InstanceNorm,
BatchNorm forward / backward over NCHW and channels-last): baracuda against torch,
same shapes, same dtype, same timer, same run.

    python3 bench/bench_norm.py            # full run
    python3 bench/bench_norm.py --quick    # smoke run: fewer samples, one pass, fewer shapes
    python3 bench/bench_norm.py --family channel   # only GroupNorm / InstanceNorm / BatchNorm rows
    python3 bench/bench_norm.py --family row --op layer_norm --kind bwd   # those rows only
    OUT=/tmp/out python3 bench/bench_norm.py   # also $OUT/bench_norm.{md,json,txt}
    python3 bench/bench_norm.py --sweep    # time register-kernel variants (PlanPreference tuning,
                                           # the keys of BARACUDA_NORM_CFG) on the key shapes, print the best

Ours runs through the plan API (selected once, `plan.run(...)` timed). torch: F.rms_norm /
F.layer_norm; the fused residual rows compare against torch's `h = x + r` followed by the norm
(two kernels, the same two outputs); backward rows time torch.autograd.grad on a retained graph
(grad_x, grad_weight, grad_bias) against our backward from the saved stats. Bandwidth counts each
operand once (x, y, residual, residual_out, grad_out, grad_x; weights are negligible) and is
given as a fraction of the device-to-device copy bandwidth measured at the start of the run.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402

DEV = "cuda"
BF = torch.bfloat16
TOL = 2e-2  # ||ours - torch|| / ||torch|| in bf16: both compute in f32, round once (torch's add + norm twice)

SHAPES = [(32768, 4096), (8192, 8192), (4096, 16384), (2048, 65536), (65536, 512), (262144, 128)]
QUICK_SHAPES = [(32768, 4096), (65536, 512), (2048, 65536)]


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.bfloat16, list(t.stride()))


def rms_torch(h, w, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(h, (h.shape[-1],), w, eps)
    return (h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps)).to(h.dtype) * w


def run_case(op, kind, shape, args, copy_gbs, with_torch=True, tuning=""):
    """kind: 'fwd', 'fwd+res', 'bwd'. Returns a result row (dict)."""
    rows, H = shape
    layer = op == "layer_norm"
    eps = 1e-5 if layer else 1e-6
    n_io = {"fwd": 2, "fwd+res": 4, "bwd": 3}[kind]
    set_bytes = n_io * rows * H * 2
    nsets = C.rotation_sets(set_bytes)
    w = torch.randn(H, device=DEV, dtype=BF)
    b = torch.randn(H, device=DEV, dtype=BF) if layer else None
    xs = [torch.randn(shape, device=DEV, dtype=BF) for _ in range(nsets)]
    row = dict(op=op, kind=kind, shape=list(shape), bytes=set_bytes, sets=nsets)
    if kind.startswith("fwd"):
        res = kind == "fwd+res"
        rs = [torch.randn(shape, device=DEV, dtype=BF) for _ in range(nsets)] if res else [None] * nsets
        ys = [torch.empty(shape, device=DEV, dtype=BF) for _ in range(nsets)]
        ros = [torch.empty(shape, device=DEV, dtype=BF) for _ in range(nsets)] if res else [None] * nsets
        d = bc.NormDescriptor(op, spec(xs[0]), weight=bc.bfloat16, bias=bc.bfloat16 if layer else None,
                              residual=res, eps=eps)
        plan = bc.NormPlan.select(d, bc.PlanPreference(tuning=tuning))

        def ours(i):
            plan.run(y=ys[i], x=xs[i], weight=w, bias=b, residual=rs[i], residual_out=ros[i])

        def theirs(i):
            h = xs[i] + rs[i] if res else xs[i]
            return (F.layer_norm(h, (H,), w, b, eps) if layer else rms_torch(h, w, eps)), h

        ours(0)
        ty, th = theirs(0)
        err = C.rel_err(ys[0], ty)
        if res:
            err = max(err, C.rel_err(ros[0], th))
    else:
        gos = [torch.randn(shape, device=DEV, dtype=BF) for _ in range(nsets)]
        gxs = [torch.empty(shape, device=DEV, dtype=BF) for _ in range(nsets)]
        stats = []
        for x in xs:
            out = bc.layer_norm(x, w, b, eps, save_stats=True) if layer else bc.rms_norm(x, w, eps, save_stats=True)
            stats.append(out[1:])
        d = bc.NormDescriptor(op + "_backward", spec(xs[0]), weight=bc.bfloat16, bias=bc.bfloat16 if layer else None)
        plan = bc.NormPlan.select(d, bc.PlanPreference(tuning=tuning))
        ws = torch.empty(max(1, plan.workspace_bytes()), device=DEV, dtype=torch.uint8)
        gw = torch.empty(H, device=DEV, dtype=BF)
        gb = torch.empty(H, device=DEV, dtype=BF) if layer else None

        def ours(i):
            st = stats[i]
            plan.run(grad_x=gxs[i], grad_out=gos[i], x=xs[i], mean=st[0] if layer else None, rstd=st[-1], weight=w,
                     grad_weight=gw, grad_bias=gb, workspace=ws)

        wl = w.detach().clone().requires_grad_(True)
        bl = b.detach().clone().requires_grad_(True) if layer else None
        leaves = [x.detach().requires_grad_(True) for x in xs]
        graphs = [F.layer_norm(x, (H,), wl, bl, eps) if layer else rms_torch(x, wl, eps) for x in leaves]

        def theirs(i):
            inputs = (leaves[i], wl, bl) if layer else (leaves[i], wl)
            return torch.autograd.grad(graphs[i], inputs, gos[i], retain_graph=True)

        ours(0)
        tg = theirs(0)
        err = max(C.rel_err(gxs[0], tg[0]), C.rel_err(gw, tg[1]))
        if layer:
            err = max(err, C.rel_err(gb, tg[2]))
    row.update(sku=plan.sku.name, rel_err=err, ok=bool(err <= TOL))
    small = set_bytes < 64 * C.MiB
    inner = 10 if small else 1
    benches = {"ours": C.GpuBench(ours, nsets, inner=inner, graph=small)}
    if with_torch:
        benches["torch"] = C.GpuBench(theirs, nsets, inner=inner, graph=False)
    t = C.measure(benches, iters=args.iters, passes=args.passes)
    if not with_torch:
        row["ours"] = t["ours"]
        row["ours_gbs"] = set_bytes / t["ours"].median / 1e9
        row["ours_copy_frac"] = row["ours_gbs"] / copy_gbs
        xs = benches = None  # released; the closures above still name them
        C.free_memory()
        return row
    for side in ("ours", "torch"):
        s = t[side].median
        row[side] = t[side]
        row[side + "_gbs"] = set_bytes / s / 1e9
        row[side + "_copy_frac"] = row[side + "_gbs"] / copy_gbs
    row["speedup"] = t["torch"].median / t["ours"].median
    xs = benches = None  # released; the closures above still name them
    C.free_memory()
    return row


# ---- GroupNorm / InstanceNorm / BatchNorm ----------------------------------------------------------
# (op, kind, shape, layout, dtype): conv-net shapes, NCHW ("nc") and channels-last ("cl").
CHANNEL_CASES = [
    ("batch_norm", "fwd", (32, 256, 56, 56), "cl", BF), ("batch_norm", "fwd", (32, 256, 56, 56), "nc", BF),
    ("batch_norm", "bwd", (32, 256, 56, 56), "cl", BF), ("batch_norm", "bwd", (32, 256, 56, 56), "nc", BF),
    ("batch_norm", "fwd", (256, 2048, 7, 7), "cl", BF), ("batch_norm", "fwd", (256, 2048, 7, 7), "nc", BF),
    ("batch_norm", "fwd", (32, 256, 56, 56), "nc", torch.float32),
    ("batch_norm", "bwd", (32, 256, 56, 56), "nc", torch.float32),
    ("batch_norm_eval", "fwd", (32, 256, 56, 56), "cl", BF),
    ("batch_norm", "fwd", (8192, 4096), "nc", BF),
    ("group_norm", "fwd", (8, 256, 64, 64), "nc", BF), ("group_norm", "fwd", (8, 256, 64, 64), "cl", BF),
    ("group_norm", "bwd", (8, 256, 64, 64), "nc", BF), ("group_norm", "bwd", (8, 256, 64, 64), "cl", BF),
    ("group_norm", "fwd", (16, 512, 32, 32), "nc", torch.float32),
    ("group_norm", "bwd", (16, 512, 32, 32), "nc", torch.float32),
    ("instance_norm", "fwd", (16, 64, 128, 128), "nc", BF), ("instance_norm", "bwd", (16, 64, 128, 128), "nc", BF),
    # Late-stage ResNet maps (7 x 7): the backward and inference (apply pass only) in both layouts.
    ("batch_norm", "bwd", (256, 2048, 7, 7), "cl", BF), ("batch_norm", "bwd", (256, 2048, 7, 7), "nc", BF),
    ("batch_norm_eval", "fwd", (256, 2048, 7, 7), "cl", BF), ("batch_norm_eval", "fwd", (256, 2048, 7, 7), "nc", BF),
    ("batch_norm_eval", "fwd", (32, 256, 56, 56), "nc", BF),
]
QUICK_CHANNEL_CASES = [CHANNEL_CASES[i] for i in (0, 1, 2, 3, 10, 12)]
_BC_DT = {torch.bfloat16: bc.bfloat16, torch.float32: bc.float32, torch.float16: bc.float16, torch.float64: bc.float64}


def _chan_layout(x, layout):
    if layout == "nc" or x.dim() < 3:
        return x.contiguous()
    perm = [0] + list(range(2, x.dim())) + [1]
    inv = [0, x.dim() - 1] + list(range(1, x.dim() - 1))
    return x.permute(perm).contiguous().permute(inv)


def run_channel_case(op, kind, shape, layout, dt, args, copy_gbs):
    """One GroupNorm / InstanceNorm / BatchNorm row: ours through the plan API, torch through F.*
    (backward: torch.autograd.grad on a retained graph). Bytes: x and y (forward), grad_out, x
    and grad_x (backward), each once; ours reads x twice in training-mode forward (stats + apply)."""
    Cc = shape[1]
    eval_mode = op == "batch_norm_eval"
    base = "batch_norm" if eval_mode else op
    G = 32 if base == "group_norm" else 0
    numel = 1
    for d in shape:
        numel *= d
    esz = torch.finfo(dt).bits // 8
    set_bytes = (2 if kind == "fwd" else 3) * numel * esz
    nsets = C.rotation_sets(set_bytes)
    xs = [_chan_layout(torch.randn(shape, device=DEV, dtype=dt) * 2 + 1, layout) for _ in range(nsets)]
    w = torch.randn(Cc, device=DEV, dtype=torch.float32 if dt == BF else dt)
    b = torch.randn(Cc, device=DEV, dtype=w.dtype)
    run_dt = torch.float32 if dt in (BF, torch.float16) else dt
    rm, rv = torch.zeros(Cc, device=DEV, dtype=run_dt), torch.ones(Cc, device=DEV, dtype=run_dt)
    training = not eval_mode
    use_running = base == "batch_norm"
    d = bc.ChannelNormDescriptor(base + ("_backward" if kind == "bwd" else ""),
                                 bc.TensorSpec(tuple(shape), _BC_DT[dt], list(xs[0].stride())), num_groups=G,
                                 weight=_BC_DT[w.dtype], bias=_BC_DT[b.dtype],
                                 running=_BC_DT[run_dt] if (use_running and kind == "fwd") else None,
                                 training=training, save_stats=False)
    plan = bc.ChannelNormPlan.select(d)
    ws = torch.empty(max(1, plan.workspace_bytes()), device=DEV, dtype=torch.uint8)
    row = dict(op=op, kind=f"{kind} {layout} {str(dt).replace('torch.', '')}", shape=list(shape), bytes=set_bytes,
               sets=nsets)

    def torch_fwd(x, ww, bb):
        if base == "group_norm":  # torch's group_norm wants weight / bias in x's dtype
            return F.group_norm(x, G, ww if ww is None else ww.to(x.dtype), bb if bb is None else bb.to(x.dtype), 1e-5)
        if base == "instance_norm":
            return F.instance_norm(x, None, None, ww, bb, True, 0.1, 1e-5)
        return F.batch_norm(x, rm, rv, ww, bb, training, 0.1, 1e-5)

    if kind == "fwd":
        ys = [torch.empty_like(x) for x in xs]
        rmo, rvo = rm.clone(), rv.clone()  # ours updates its own copies

        def ours(i):
            plan.run(y=ys[i], x=xs[i], weight=w, bias=b, running_mean=rmo if use_running else None,
                     running_var=rvo if use_running else None, workspace=ws)

        def theirs(i):
            return torch_fwd(xs[i], w, b)

        ours(0)
        err = C.rel_err(ys[0], theirs(0))
    else:
        gos = [_chan_layout(torch.randn(shape, device=DEV, dtype=dt), layout) for _ in range(nsets)]
        gxs = [torch.empty_like(x) for x in xs]
        gw, gb = torch.empty_like(w), torch.empty_like(b)
        fn = {"group_norm": bc.group_norm, "instance_norm": bc.instance_norm}.get(base)
        stats = []
        for x in xs:
            if fn is bc.group_norm:
                out = bc.group_norm(x, G, w, b, save_stats=True)
            elif fn is bc.instance_norm:
                out = bc.instance_norm(x, weight=w, bias=b, save_stats=True)
            else:
                out = bc.batch_norm(x, weight=w, bias=b, training=True, save_stats=True)
            stats.append(out[1:])

        def ours(i):
            plan.run(grad_x=gxs[i], grad_out=gos[i], x=xs[i], mean=stats[i][0], rstd=stats[i][1], weight=w,
                     grad_weight=gw, grad_bias=gb, workspace=ws)

        wl, bl = w.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
        leaves = [x.detach().requires_grad_(True) for x in xs]
        graphs = [torch_fwd(x, wl, bl) for x in leaves]

        def theirs(i):
            return torch.autograd.grad(graphs[i], (leaves[i], wl, bl), gos[i], retain_graph=True)

        ours(0)
        tg = theirs(0)
        err = max(C.rel_err(gxs[0], tg[0]), C.rel_err(gw, tg[1]), C.rel_err(gb, tg[2]))
    row.update(sku=plan.sku.name, rel_err=err, ok=bool(err <= TOL))
    small = set_bytes < 64 * C.MiB
    inner = 10 if small else 1
    benches = {"ours": C.GpuBench(ours, nsets, inner=inner, graph=small),
               "torch": C.GpuBench(theirs, nsets, inner=inner, graph=False)}
    t = C.measure(benches, iters=args.iters, passes=args.passes)
    for side in ("ours", "torch"):
        row[side] = t[side]
        row[side + "_gbs"] = set_bytes / t[side].median / 1e9
        row[side + "_copy_frac"] = row[side + "_gbs"] / copy_gbs
    row["speedup"] = t["torch"].median / t["ours"].median
    xs = benches = None  # released; the closures above still name them
    C.free_memory()
    return row


# (op, kind, shape, [config strings]): the register-kernel variants --sweep times ("" = default).
SWEEP = [
    # Operand-specialized kernels (the default with a 16-bit weight / bias) against the generic
    # kernel of the same configuration (spec=0).
    *[(op, kind, shape, ["", "spec=0"]) for shape in ((32768, 4096), (8192, 8192), (4096, 16384), (65536, 512),
                                                      (262144, 128))
      for kind in ("fwd", "bwd") for op in ("rms_norm", "layer_norm")],
    ("rms_norm", "fwd", (2048, 65536), ["", "spec=0"]),
    ("layer_norm", "fwd", (2048, 65536), ["", "spec=0"]),
    # Parameters through shared memory: the last one resident on a persistent grid (pshared=1), or
    # weight / bias copied into a ring ahead of the output loop (pshared=2).
    # pshared=0: neither (the ring is the default at 1024 x 8, 512 x 4, 256 x 4). Backward (cluster
    # kernel): the block's weight in shared memory (default) or read per row (pshared=0).
    *[(op, "fwd", (2048, 65536), ["", "pshared=0", "pshared=1"]) for op in ("layer_norm", "rms_norm")],
    *[(op, kind, shape, ["", "pshared=0"]) for kind, shape in (("fwd", (4096, 16384)), ("fwd", (8192, 8192)),
                                                              ("bwd", (2048, 65536)))
      for op in ("layer_norm", "rms_norm")],
    # Specialized variants at 8192 / 16384: register accumulators, prefetch.
    ("rms_norm", "bwd", (8192, 8192), ["", "regacc=1", "regacc=1,prefetch=0"]),
    ("layer_norm", "bwd", (8192, 8192), ["", "regacc=1", "regacc=1,prefetch=0"]),
    ("rms_norm", "bwd", (4096, 16384), ["", "prefetch=1"]),
    ("layer_norm", "bwd", (4096, 16384), ["", "prefetch=1"]),
    # The backward cluster kernel at 65536, specialized.
    ("rms_norm", "bwd", (2048, 65536), ["", "spec=0"]),
    ("layer_norm", "bwd", (2048, 65536), ["", "spec=0"]),
    # Register accumulators (regacc=1: dweight / dbias in registers, the 16-bit weight held) against
    # the shared-memory kernel, with and without the prefetch.
    ("rms_norm", "bwd", (32768, 4096), ["", "regacc=1", "prefetch=1", "regacc=1,prefetch=1"]),
    ("layer_norm", "bwd", (32768, 4096), ["", "regacc=0", "tpr=256,items=2,regacc=0", "prefetch=1",
                                          "tpr=256,items=2,regacc=1,prefetch=1"]),
    # LayerNorm backward at H = 128 (16 x 1, eight rows per block) against a warp per row.
    ("layer_norm", "bwd", (262144, 128), ["", "tpr=32,items=1"]),
    # Small groups (H = 128 / 512) with register accumulators (regacc=1) against shared ones.
    ("layer_norm", "bwd", (262144, 128), ["", "regacc=1", "regacc=0"]),
    ("rms_norm", "bwd", (262144, 128), ["", "regacc=1", "regacc=0"]),
    ("layer_norm", "bwd", (65536, 512), ["", "regacc=1", "regacc=0"]),
    ("rms_norm", "bwd", (65536, 512), ["", "regacc=1", "regacc=0"]),
    # Small groups (H = 128 / 512) with the next row prefetched into registers (prefetch=1), with
    # shared or register accumulators.
    ("layer_norm", "bwd", (262144, 128), ["", "prefetch=1", "regacc=1,prefetch=1"]),
    ("rms_norm", "bwd", (262144, 128), ["", "prefetch=1", "regacc=1,prefetch=1"]),
    ("layer_norm", "bwd", (65536, 512), ["", "prefetch=1", "regacc=1,prefetch=1"]),
    ("rms_norm", "bwd", (65536, 512), ["", "prefetch=1", "regacc=1,prefetch=1"]),
    # The open choices (defaults against their nearest rivals; prefetch=1 / 0: the kernels that copy
    # the block's next row into shared memory during this one, or not).
    ("rms_norm", "fwd", (8192, 8192), ["", "tpr=512,items=2,rows=1,prefetch=1", "tpr=512,items=2,rows=2"]),
    ("layer_norm", "fwd", (8192, 8192), ["", "tpr=512,items=2,rows=1,prefetch=1", "tpr=256,items=4,prefetch=1"]),
    ("rms_norm", "bwd", (32768, 4096), ["", "tpr=128,items=4", "tpr=256,items=2,prefetch=1"]),
    ("layer_norm", "bwd", (32768, 4096), ["", "tpr=128,items=4", "tpr=256,items=2,prefetch=1"]),
    ("rms_norm", "bwd", (8192, 8192), ["", "tpr=512,items=2,prefetch=0", "tpr=256,items=4"]),
    ("layer_norm", "bwd", (8192, 8192), ["", "tpr=512,items=2,prefetch=0", "tpr=256,items=4"]),
    ("rms_norm", "bwd", (65536, 512), ["", "tpr=128,items=1"]),
    ("layer_norm", "bwd", (65536, 512), ["", "tpr=128,items=1"]),
    ("rms_norm", "fwd", (2048, 65536), ["", "prefetch=1"]),
    ("layer_norm", "fwd", (2048, 65536), ["", "prefetch=1", "cluster=8,tpr=256,items=4"]),
    ("rms_norm", "fwd", (4096, 16384), ["", "prefetch=1"]),
    ("layer_norm", "fwd", (4096, 16384), ["", "prefetch=1"]),
    # H = 8192 (1024 vectors): 512 x 2 (two rows per block or one), 256 x 4, 1024 x 1.
    ("rms_norm", "fwd", (8192, 8192), ["", "tpr=512,items=2,rows=1", "tpr=256,items=4,rows=1", "tpr=256,items=4,rows=2",
                                       "tpr=1024,items=1"]),
    ("layer_norm", "fwd", (8192, 8192), ["", "tpr=512,items=2,rows=1", "tpr=256,items=4,rows=1",
                                         "tpr=1024,items=1"]),
    ("rms_norm", "bwd", (8192, 8192), ["", "tpr=256,items=4", "tpr=1024,items=1"]),
    ("layer_norm", "bwd", (8192, 8192), ["", "tpr=256,items=4", "tpr=1024,items=1"]),
    ("rms_norm", "fwd", (65536, 512), ["", "tpr=32,items=2,rows=1", "tpr=128,items=1,rows=2", "tpr=128,items=1,rows=1"]),
    ("layer_norm", "fwd", (65536, 512), ["", "tpr=32,items=2,rows=1", "tpr=128,items=1,rows=2"]),
    ("rms_norm", "fwd", (262144, 128), ["", "tpr=16,items=1,rows=2", "tpr=16,items=1,rows=4"]),
    ("layer_norm", "fwd", (262144, 128), ["", "tpr=16,items=1,rows=2", "tpr=16,items=1,rows=4"]),
    ("rms_norm", "fwd", (65536, 512), ["tpr=32,items=2,rows=2"]),
    # Long rows: the thread-block cluster forward (sm_90) against the one-block register kernel
    # ("tpr=1024,items=8" / "cluster=1"); the cluster shapes are those of kClusterShapes.
    ("rms_norm", "fwd", (2048, 65536), ["", "tpr=1024,items=8", "cluster=4,tpr=512,items=4",
                                        "cluster=8,tpr=256,items=4", "cluster=8,tpr=512,items=2"]),
    ("layer_norm", "fwd", (2048, 65536), ["", "tpr=1024,items=8", "cluster=4,tpr=512,items=4",
                                          "cluster=8,tpr=256,items=4", "cluster=8,tpr=512,items=2"]),
    ("layer_norm", "fwd+res", (2048, 65536), ["", "tpr=1024,items=8", "cluster=4,tpr=512,items=4",
                                              "cluster=8,tpr=256,items=4", "cluster=8,tpr=512,items=2"]),
    ("rms_norm", "fwd", (4096, 16384), ["", "cluster=1", "tpr=512,items=4", "cluster=2,tpr=256,items=4",
                                        "cluster=4,tpr=256,items=2"]),
    ("layer_norm", "fwd", (4096, 16384), ["", "cluster=1", "tpr=512,items=4", "cluster=2,tpr=256,items=4",
                                          "cluster=4,tpr=256,items=2"]),
    ("rms_norm", "bwd", (32768, 4096), ["", "tpr=512,items=1", "tpr=128,items=4", "tpr=256,items=2"]),
    ("layer_norm", "bwd", (32768, 4096), ["", "tpr=512,items=1", "tpr=128,items=4"]),
    ("layer_norm", "bwd", (65536, 512), ["", "tpr=128,items=1", "tpr=32,items=2"]),
    ("layer_norm", "bwd", (4096, 16384), ["", "tpr=512,items=4", "tpr=1024,items=2,xs=1"]),
    ("rms_norm", "bwd", (4096, 16384), ["", "tpr=1024,items=2,xs=1", "tpr=512,items=4"]),
    # LayerNorm backward at 8192 / 16384 against its other shapes (register accumulators, 256 x 4,
    # 1024 x 1 / 1024 x 2).
    ("layer_norm", "bwd", (8192, 8192), ["", "regacc=1", "tpr=256,items=4", "tpr=256,items=4,prefetch=1",
                                         "tpr=1024,items=1", "tpr=1024,items=1,prefetch=1"]),
    ("layer_norm", "bwd", (4096, 16384), ["", "prefetch=0", "tpr=1024,items=2", "tpr=1024,items=2,prefetch=1"]),
    # Long rows backward: the persistent cluster grid (default 192 / cs clusters) against the
    # one-block kernel + column pass (cluster=1), and other grid sizes.
    ("rms_norm", "bwd", (2048, 65536), ["", "cluster=1", "clusters=16", "clusters=24", "clusters=26", "clusters=28", "clusters=30", "clusters=32",
                                        "clusters=33", "cluster=4,tpr=256,items=4",
                                        "cluster=4,tpr=256,items=4,clusters=60", "cluster=4,tpr=256,items=4,clusters=64"]),
    ("layer_norm", "bwd", (2048, 65536), ["", "cluster=1", "clusters=16", "clusters=24", "clusters=26", "clusters=28", "clusters=30", "clusters=32",
                                          "clusters=33", "cluster=4,tpr=256,items=4",
                                          "cluster=4,tpr=256,items=4,clusters=60", "cluster=4,tpr=256,items=4,clusters=64"]),
]


def sweep(args, copy_gbs) -> int:
    """Each entry's configurations timed in `--rounds` rounds (A B C, A B C, ...: a slow first
    configuration or a clock change shows as a round-to-round difference, not as a verdict); a
    configuration's time is its fastest round's median."""
    results = []
    for op, kind, shape, cfgs in SWEEP[:args.first or len(SWEEP)]:
        if args.match and args.match not in f"{op} {kind} {shape[0]}x{shape[1]}":
            continue
        found = {}
        for _ in range(max(1, args.rounds)):
            for cfg in cfgs:
                try:
                    r = run_case(op, kind, shape, args, copy_gbs, with_torch=False, tuning=cfg)
                except Exception as e:  # noqa: BLE001
                    print(f"{op} {kind} {shape} [{cfg}] ERROR {type(e).__name__}: {e}", flush=True)
                    C.free_memory()
                    continue
                us = r["ours"].median * 1e6
                prev = found.get(cfg)
                if prev is None or us < prev["us"] or not r["ok"]:
                    found[cfg] = dict(op=op, kind=kind, shape=list(shape), cfg=cfg, sku=r["sku"], us=us,
                                      copy_frac=r["ours_copy_frac"], ok=r["ok"] and (prev is None or prev["ok"]),
                                      rounds=(prev["rounds"] if prev else []) + [round(us, 1)])
                else:
                    prev["rounds"].append(round(us, 1))
        for cfg in cfgs:
            if cfg not in found:
                continue
            f = found[cfg]
            print(f"{op:10s} {kind:7s} {shape[0]}x{shape[1]:<6d} [{cfg or 'default':28s}] {f['sku']:50s} "
                  f"{f['us']:8.1f} us {100 * f['copy_frac']:5.1f}% copy {'ok' if f['ok'] else 'FAIL'}  rounds "
                  f"{' '.join(map(str, f['rounds']))}", flush=True)
            results.append(f)
        ok = [f for f in found.values() if f["ok"]]
        if ok:
            b = min(ok, key=lambda f: f["us"])
            print(f"  best for {op} {kind} {shape}: [{b['cfg'] or 'default'}] {b['sku']} {b['us']:.1f} us", flush=True)
    lines = [f"{r['op']} {r['kind']} {r['shape']} [{r['cfg'] or 'default'}] {r['sku']} {r['us']:.1f} us "
             f"{100 * r['copy_frac']:.1f}% {'ok' if r['ok'] else 'FAIL'}" for r in results]
    C.write_outputs("bench_norm_sweep", "\n".join(lines), {"results": results}, text="\n".join(lines))
    return 3 if any(not r["ok"] for r in results) else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 samples, one pass, three shapes")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--passes", type=int, default=None)
    ap.add_argument("--sweep", action="store_true", help="time register-kernel variants on the key shapes")
    ap.add_argument("--match", default="", help="--sweep: only the entries whose 'op kind RxH' contains this")
    ap.add_argument("--first", type=int, default=0, help="--sweep: only the first N entries")
    ap.add_argument("--rounds", type=int, default=2, help="--sweep: rounds over each entry's configurations")
    ap.add_argument("--family", choices=["all", "row", "channel"], default="all",
                    help="row: RMSNorm / LayerNorm rows only; channel: GroupNorm / InstanceNorm / BatchNorm only")
    ap.add_argument("--kind", choices=["fwd", "fwd+res", "bwd"], action="append",
                    help="RMSNorm / LayerNorm rows of this kind only (repeatable; default: all three)")
    ap.add_argument("--op", choices=["rms_norm", "layer_norm"], action="append",
                    help="RMSNorm / LayerNorm rows of this op only (repeatable; default: both)")
    args = ap.parse_args(argv)
    if args.sweep and args.iters is None:
        args.iters, args.passes = 20, 1
    args.iters = args.iters or (20 if args.quick else 50)
    args.passes = args.passes or (1 if args.quick else 2)
    info = C.device_info()
    copy = C.copy_bandwidth(512 * C.MiB, iters=args.iters, passes=args.passes)
    copy_gbs = copy["gbs"]
    print(f"# {info['name']}  copy bandwidth {copy_gbs:.0f} GB/s", flush=True)
    if args.sweep:
        return sweep(args, copy_gbs)
    results, bad = [], []
    for shape in (QUICK_SHAPES if args.quick else SHAPES) if args.family in ("all", "row") else []:
        for op in args.op or ("rms_norm", "layer_norm"):
            for kind in args.kind or ("fwd", "fwd+res", "bwd"):
                key = f"{op} {kind} {shape[0]}x{shape[1]}"
                try:
                    r = run_case(op, kind, shape, args, copy_gbs)
                except Exception as e:  # noqa: BLE001  (one failing row must not hide the others)
                    traceback.print_exc()
                    r = dict(op=op, kind=kind, shape=list(shape), error=f"{type(e).__name__}: {e}", ok=False)
                    C.free_memory()
                results.append(r)
                if not r.get("ok"):
                    bad.append(key)
                print(key, "->", "ERROR " + r["error"] if "error" in r else
                      f"ours {r['ours_gbs']:.0f} GB/s ({100 * r['ours_copy_frac']:.0f}% copy), torch "
                      f"{r['torch_gbs']:.0f} GB/s, x{r['speedup']:.2f}, err {r['rel_err']:.1e}", flush=True)
    for op, kind, shape, layout, dt in (QUICK_CHANNEL_CASES if args.quick else CHANNEL_CASES) \
            if args.family in ("all", "channel") else []:
        key = f"{op} {kind} {layout} {dt} {'x'.join(map(str, shape))}"
        try:
            r = run_channel_case(op, kind, shape, layout, dt, args, copy_gbs)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(op=op, kind=f"{kind} {layout}", shape=list(shape), error=f"{type(e).__name__}: {e}", ok=False)
            C.free_memory()
        results.append(r)
        if not r.get("ok"):
            bad.append(key)
        print(key, "->", "ERROR " + r["error"] if "error" in r else
              f"ours {r['ours_gbs']:.0f} GB/s ({100 * r['ours_copy_frac']:.0f}% copy), torch "
              f"{r['torch_gbs']:.0f} GB/s, x{r['speedup']:.2f}, err {r['rel_err']:.1e}", flush=True)
    headers = ["op", "kind", "shape", "ours us", "ours GB/s", "% copy", "torch us", "torch GB/s", "torch % copy",
               "speedup", "check", "sku"]
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["op"], r["kind"], "x".join(map(str, r["shape"])), "-", "-", "-", "-", "-", "-", "-",
                         "ERROR", r["error"][:60]])
            continue
        rows.append([r["op"], r["kind"], "x".join(map(str, r["shape"])), C.fmt(r["ours"].median * 1e6),
                     C.fmt(r["ours_gbs"], ".0f"), C.fmt(100 * r["ours_copy_frac"], ".0f") + "%",
                     C.fmt(r["torch"].median * 1e6), C.fmt(r["torch_gbs"], ".0f"),
                     C.fmt(100 * r["torch_copy_frac"], ".0f") + "%", C.fmt(r["speedup"], ".2f") + "x",
                     "ok" if r["ok"] else f"FAIL {r['rel_err']:.1e}", r["sku"]])
    title = (f"bench_norm on {info['name']} (copy {copy_gbs:.0f} GB/s), bf16 unless the kind says, weight (+ bias "
             f"for LayerNorm and the channel norms)")
    text = title + "\n\n" + C.text_table(headers, rows)
    md = "## " + title + "\n\n" + C.markdown_table(headers, rows)
    print("\n" + text)
    C.write_outputs("bench_norm", md, {"device": info, "copy": copy, "results": results}, text=text)
    if bad:
        print("rows that failed:", ", ".join(bad))
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
