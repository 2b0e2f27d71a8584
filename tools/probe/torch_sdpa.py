"""torch's F.scaled_dot_product_attention forward (or, with --backward, its backward alone) on the probe
harnesses' cases, in the same device call as a probe (same-run comparisons): dense bf16 [B, S, H, D]
memory viewed as [B, H, S, D], one backend pinned (flash: FlashAttention-2; cudnn), median of 20 with
L2 flushed (256 MB overwritten) before each.
    python3 tools/probe/torch_sdpa.py [--backend flash|cudnn] [--backward] "B S H HKV D CAUSAL" ...
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser()
ap.add_argument("--backend", default="flash", choices=["flash", "cudnn"])
ap.add_argument("--backward", action="store_true", help="time autograd.grad of one forward (the backward alone)")
ap.add_argument("cases", nargs="+")
args = ap.parse_args()
backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[args.backend]
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for case in args.cases:
    b, s, h, hkv, d, causal = (int(x) for x in case.split())
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    times = []
    with sdpa_kernel(backend):
        if args.backward:
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=h != hkv)
            gout = torch.randn_like(out)
        for i in range(25):
            flush.fill_(i)
            a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            if args.backward:
                torch.autograd.grad(out, (q, k, v), gout, retain_graph=True)
            else:
                F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=h != hkv)
            e.record()
            e.synchronize()
            if i >= 5:
                times.append(a.elapsed_time(e) * 1e3)
    us = sorted(times)[len(times) // 2]
    flops = (10.0 if args.backward else 4.0) * b * h * s * s * d / (2 if causal else 1)
    kind = args.backend + (" backward" if args.backward else "")
    print(f"torch {kind} b{b} s{s} h{h}/{hkv} d{d} {'causal' if causal else '':6s}: {us:9.1f} us "
          f"{flops / us / 1e6:6.0f} TFLOP/s")
