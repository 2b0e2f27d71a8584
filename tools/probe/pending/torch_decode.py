"""torch's F.scaled_dot_product_attention on one decode step over an unpaged cache (the work of
bench_paged_attention.py's torch column): q [B, Hq, 1, D], k / v [B, Hkv, CTX, D] contiguous, enable_gqa.
Times each case (median of 20, L2 flushed) and prints GB/s of the K / V bytes; under ncu, each case's
kernels are what --kernel-name picks.
    python3 tools/probe/pending/torch_decode.py "B CTX HQ HKV D" ...
"""
import sys

import torch
import torch.nn.functional as F

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for case in sys.argv[1:]:
    b, ctx, hq, hkv, d = (int(x) for x in case.split())
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
    times = []
    for _ in range(23):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    us = sorted(times[3:])[10]
    print(f"torch decode b{b} ctx{ctx} h{hq}/{hkv} d{d}: {us:8.1f} us  {2 * k.numel() * 2 / us / 1e3:6.0f} GB/s")
