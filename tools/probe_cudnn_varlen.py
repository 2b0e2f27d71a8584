#!/usr/bin/env python3
"""Where the time of a packed (varlen) cuDNN attention goes, against the dense graph on the same
tokens: each kernel's device time (torch.profiler), forward with and without lse, and the backward.

    python3 tools/probe_cudnn_varlen.py [--b 16 --s 512 --hq 32 --hkv 8 --d 128 --causal]
"""
import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

import baracuda as bc

DEV = "cuda"


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), tuple(t.stride()))


def kernel_times(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    times = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name[:70]] += e.device_time / reps
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--s", type=int, default=512)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    a = ap.parse_args()
    b, s, total = a.b, a.s, a.b * a.s
    q = torch.randn(total, a.hq, a.d, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(total, a.hkv, a.d, device=DEV, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out, gout = torch.empty_like(q), torch.randn_like(q)
    lse = torch.empty(a.hq, total, device=DEV)
    grads = [torch.empty_like(t) for t in (q, k, v)]
    cu = torch.arange(0, total + 1, s, device=DEV, dtype=torch.int32)
    packed = dict(varlen=True, batch=b, max_seqlen_q=s, max_seqlen_k=s, causal=a.causal)
    dense = lambda t: t.view(b, s, t.shape[1], a.d)  # noqa: E731
    cases = {}
    for name, kw, tensors in (("dense fwd", dict(causal=a.causal, lse=True), [dense(t) for t in (q, k, v, out)]),
                              ("packed fwd lse", dict(lse=True, **packed), [q, k, v, out]),
                              ("packed fwd", dict(**packed), [q, k, v, out])):
        plan = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", *map(spec, tensors), **kw))
        ws = torch.empty(max(plan.workspace_bytes(), 1), device=DEV, dtype=torch.uint8)
        extra = dict(cu_seqlens_q=cu, cu_seqlens_k=cu) if "packed" in name else {}
        if kw.get("lse"):
            extra["lse"] = torch.empty(b, a.hq, s, device=DEV) if name == "dense fwd" else lse
        qq, kk, vv, oo = tensors
        cases[name] = (plan.sku.name, lambda p=plan, w=ws, e=extra, t=(qq, kk, vv, oo):
                       p.run(q=t[0], k=t[1], v=t[2], out=t[3], workspace=w, **e))
    bwd = bc.AttentionPlan.select(bc.AttentionDescriptor("attention_backward", spec(q), spec(k), spec(v), spec(out),
                                                         **packed))
    bws = torch.empty(max(bwd.workspace_bytes(), 1), device=DEV, dtype=torch.uint8)
    cases["packed fwd lse"][1]()
    cases["packed bwd"] = (bwd.sku.name, lambda: bwd.run(q=q, k=k, v=v, out=out, lse=lse, grad_out=gout,
                                                         grad_q=grads[0], grad_k=grads[1], grad_v=grads[2],
                                                         cu_seqlens_q=cu, cu_seqlens_k=cu, workspace=bws))
    for name, (sku, fn) in cases.items():
        times = kernel_times(fn)
        print(f"{name} ({sku}): {sum(times.values()):.1f} us in all")
        for kname, t in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"    {t:8.1f} us  {kname}")


if __name__ == "__main__":
    main()
