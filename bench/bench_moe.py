#!/usr/bin/env python3
"""MoE: a Mixtral-style layer (gate, top-2, SwiGLU experts, weighted combine) through baracuda's routing
and grouped GEMM, next to transformers' loop over experts, same run, CUDA events, median.

    python3 bench/bench_moe.py [--quick] [--rows REGEX]
    OUT=/tmp/out python3 bench/bench_moe.py   # also $OUT/bench_moe.{md,json,txt}

Ours: bc.moe_gate -> bc.moe_permute -> grouped_linear over w1 and w3 stacked per expert (one GEMM
per expert for both) -> bc.swiglu -> grouped_linear (w2) -> bc.moe_unpermute. The row says how
grouped_linear runs: "offsets", the device offsets on the kernel the plan picks (no host sync); "gemv" /
"tiled" / "sm90", the device offsets on the decode kernel / our prefill kernel / CUTLASS's sm_90a grouped
GEMM, named by tuning; "sizes", host group
sizes read from the offsets (one sync, one cuBLASLt GEMM per expert). torch: the MixtralSparseMoeBlock
loop (softmax, topk, renormalise, per expert torch.where + two matmuls + index_add). "GEMMs alone": the
two projections as cuBLASLt GEMMs per expert on the routed rows (the floor any implementation pays);
"torch grouped_mm": the same two projections through torch._grouped_mm (device offsets), where it runs.
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
# (tokens, hidden, intermediate, experts, top_k, grouped path): the prefill row, a smaller
# model, decode batches, many small experts.
ROWS = [(4096, 4096, 14336, 8, 2, "sizes"), (4096, 4096, 14336, 8, 2, "offsets"), (2048, 2048, 5632, 8, 2, "sizes"),
        (2048, 2048, 5632, 8, 2, "offsets"), (512, 4096, 14336, 8, 2, "offsets"), (512, 4096, 14336, 8, 2, "gemv"),
        (256, 4096, 14336, 8, 2, "offsets"), (256, 4096, 14336, 8, 2, "gemv"), (64, 4096, 14336, 8, 2, "offsets"),
        (64, 4096, 14336, 8, 2, "tiled"), (8, 4096, 14336, 8, 2, "offsets"), (4096, 4096, 14336, 8, 2, "tiled"),
        (4096, 4096, 14336, 8, 2, "sm90"), (512, 4096, 14336, 8, 2, "sm90"), (256, 4096, 14336, 8, 2, "sm90"),
        (64, 4096, 14336, 8, 2, "sm90"),
        # many small experts (a Qwen3-MoE-like layer: 128 experts, top-8, intermediate 768)
        (4096, 2048, 768, 128, 8, "sizes"), (4096, 2048, 768, 128, 8, "offsets")]
_PLANS = {}


def kernel_linear(x, w, offsets, kernel):
    """grouped_linear with the device offsets on the kernel named by tuning ("gemv", "tiled", ...)."""
    key = (tuple(x.shape), tuple(w.shape), offsets.dtype, kernel)
    plan = _PLANS.get(key)
    if plan is None:
        S, dt = bc.TensorSpec, bc.bfloat16
        desc = bc.GroupedGemmDescriptor(S(tuple(x.shape), dt), S(tuple(w.shape), dt), S((x.shape[0], w.shape[1]), dt),
                                        offsets_dtype=bc.dtype(offsets.dtype))
        plan = _PLANS[key] = bc.GroupedGemmPlan.select(desc, bc.PlanPreference(tuning=f"kernel={kernel}"))
    out = torch.empty(x.shape[0], w.shape[1], device=x.device, dtype=x.dtype)
    ws = torch.empty(plan.workspace_bytes(), device=x.device, dtype=torch.uint8) if plan.workspace_bytes() else None
    plan.run(out, x, w, offsets=offsets, workspace=ws)
    return out


def torch_grouped_mm(xs, w, offsets):
    """torch's own grouped GEMM on the device offsets, or None where this torch / GPU has none."""
    fn = getattr(torch, "_grouped_mm", None)
    if fn is None:
        return None
    try:
        return fn(xs, w.transpose(1, 2), offs=offsets[1:].to(torch.int32))
    except Exception:  # noqa: BLE001
        return None


def torch_layer(x, gate_w, w1, w3, w2, k, logits=None):
    """logits: the router's (for the check: ours, so a near-tie cannot route a token differently)."""
    logits = x @ gate_w.t() if logits is None else logits
    p = logits.float().softmax(-1)
    rw, sel = p.topk(k, dim=-1)
    rw = (rw / rw.sum(-1, keepdim=True)).to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok, slot = torch.where(sel == e)
        if tok.numel() == 0:
            continue
        xe = x[tok]
        h = torch.nn.functional.silu(xe @ w1[e].t()) * (xe @ w3[e].t())
        out.index_add_(0, tok, (h @ w2[e].t()) * rw[tok, slot, None])
    return out


def ours_layer(x, gate_w, w13, w2, k, path):
    """w13: w1 and w3 stacked per expert ([E, 2I, H], as engines store them): one grouped GEMM for both."""
    w, ids = bc.moe_gate(bc.linear(x, gate_w), k)
    xs, offsets, pos = bc.moe_permute(x, ids, w13.shape[0])
    if path in ("tiled", "gemv", "sm90"):
        h = bc.swiglu(kernel_linear(xs, w13, offsets, path))
        return bc.moe_unpermute(kernel_linear(h, w2, offsets, path), pos, w)
    if path == "sizes":
        sizes = torch.diff(offsets).tolist()
        kw = dict(group_sizes=sizes)
    else:
        kw = dict(offsets=offsets, max_rows_per_group=x.shape[0])
    h = bc.swiglu(bc.grouped_linear(xs, w13, **kw))  # silu(first half) * second half
    return bc.moe_unpermute(bc.grouped_linear(h, w2, **kw), pos, w)


def plan_sku(xs, w, offsets, path, hint):
    """The SKU of the row's first grouped GEMM (w1 / w3), as ours_layer selects it."""
    S, dt = bc.TensorSpec, bc.bfloat16
    shapes = (S(tuple(xs.shape), dt), S(tuple(w.shape), dt), S((xs.shape[0], w.shape[1]), dt))
    if path == "sizes":
        desc = bc.GroupedGemmDescriptor(*shapes, group_sizes=torch.diff(offsets).tolist())
        return bc.GroupedGemmPlan.select(desc).sku.name
    desc = bc.GroupedGemmDescriptor(*shapes, offsets_dtype=bc.dtype(offsets.dtype),
                                    max_rows_per_group=-1 if path != "offsets" else hint)
    pref = bc.PlanPreference(tuning=f"kernel={path}") if path != "offsets" else bc.PlanPreference()
    return bc.GroupedGemmPlan.select(desc, pref).sku.name


def run_row(row, args):
    t, hdim, inter, e, k, path = row
    g = torch.Generator(device=DEV).manual_seed(0)
    x = torch.randn(t, hdim, generator=g, device=DEV).to(BF)
    gate_w = (torch.randn(e, hdim, generator=g, device=DEV) / hdim ** 0.5).to(BF)
    w1, w3 = ((torch.randn(e, inter, hdim, generator=g, device=DEV) / hdim ** 0.5).to(BF) for _ in range(2))
    w2 = (torch.randn(e, hdim, inter, generator=g, device=DEV) / inter ** 0.5).to(BF)
    w13 = torch.cat([w1, w3], dim=1).contiguous()
    got = ours_layer(x, gate_w, w13, w2, k, path)
    ref = torch_layer(x.float(), gate_w.float(), w1.float(), w3.float(), w2.float(), k,
                      logits=bc.linear(x, gate_w).float())
    err = C.rel_err(got, ref)
    ok = err <= 3e-2
    ours = C.GpuBench(lambda i: ours_layer(x, gate_w, w13, w2, k, path), 1)
    base = C.GpuBench(lambda i: torch_layer(x, gate_w, w1, w3, w2, k), 1)
    # The floor: the layer's two projections alone, as cuBLASLt GEMMs per expert on routed rows (what
    # any implementation, torch's loop included, pays at least).
    _, ids = bc.moe_gate(bc.linear(x, gate_w), k)
    xs, offsets, _ = bc.moe_permute(x, ids, e)
    sizes = torch.diff(offsets).tolist()
    h = torch.empty(xs.shape[0], inter, device=DEV, dtype=BF)
    floor = C.GpuBench(lambda i: (bc.grouped_linear(xs, w13, group_sizes=sizes),
                                  bc.grouped_linear(h, w2, group_sizes=sizes)), 1)
    benches = {"ours": ours, "torch": base, "floor": floor}
    if torch_grouped_mm(xs, w13, offsets) is not None:
        benches["grouped_mm"] = C.GpuBench(lambda i: (torch_grouped_mm(xs, w13, offsets),
                                                      torch_grouped_mm(h, w2, offsets)), 1)
    tm = C.measure(benches, iters=args.iters, passes=args.passes)
    flops = 2 * t * k * 3 * hdim * inter
    sku = plan_sku(xs, w13, offsets, path, t)
    w1 = w2 = w3 = w13 = xs = h = None  # free the weights before the next row (the closures hold them)
    C.free_memory()
    return dict(key=f"t{t} h{hdim} i{inter} e{e} k{k} {path}", error="", ok=ok, rel_err=err,
                ours_us=tm["ours"].median * 1e6, torch_us=tm["torch"].median * 1e6,
                ours_tflops=flops / tm["ours"].median / 1e12, speedup=tm["torch"].median / tm["ours"].median,
                floor_us=tm["floor"].median * 1e6, floor_speedup=tm["torch"].median / tm["floor"].median,
                grouped_mm_us=tm["grouped_mm"].median * 1e6 if "grouped_mm" in tm else None,
                sku=sku, timing=tm)


def main():
    args = C.parse_bench_args(quick=(5, 1), full=(20, 2))
    info = C.device_info()
    rows, t0 = [], time.time()
    for row in ROWS:
        key = f"t{row[0]} h{row[1]} i{row[2]} e{row[3]} k{row[4]} {row[5]}"
        if not re.search(args.rows, key):
            continue
        try:
            r = run_row(row, args)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r = dict(key=key, error=str(e), ok=False)
        rows.append(r)
    headers = ["row", "ours us", "torch us", "speedup", "ours TFLOP/s", "GEMMs alone us", "torch / GEMMs",
               "torch grouped_mm us", "check", "first GEMM's sku"]
    table = [[r["key"]] + ["-"] * 7 + ["ERROR " + r["error"][:50], "-"] if r["error"] else
             [r["key"], C.fmt(r["ours_us"]), C.fmt(r["torch_us"]), C.fmt(r["speedup"], ".2f") + "x",
              C.fmt(r["ours_tflops"], ".0f"), C.fmt(r["floor_us"]), C.fmt(r["floor_speedup"], ".2f") + "x",
              C.fmt(r["grouped_mm_us"]) if r["grouped_mm_us"] else "-", "ok" if r["ok"] else "FAILED", r["sku"]]
             for r in rows]
    head = f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}; {time.time() - t0:.0f} s\n"
    text = head + "\n" + C.text_table(headers, table)
    C.write_outputs("bench_moe", f"# bench_moe\n\n{head}\n" + C.markdown_table(headers, table),
                    {"device": info, "rows": rows}, text)
    print(text)
    return 0 if all(r.get("ok") for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
