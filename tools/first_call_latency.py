#!/usr/bin/env python3
"""The first-use cost of each family's kernels: in a fresh process, the wall time of the first call of
one op per family (synchronized) next to its second call. The first call loads (and, with
BARACUDA_FATBIN_COMPRESSION=size, decompresses) the module of that kernel: run it on two builds,
with and without the compression, to see what the smaller wheel costs.

    python3 tools/first_call_latency.py          # one table; prints the import time first
"""
from __future__ import annotations

import time

t0 = time.perf_counter()
import torch  # noqa: E402

t1 = time.perf_counter()
import baracuda as bc  # noqa: E402

t2 = time.perf_counter()


def main() -> int:
    dev = "cuda"
    torch.cuda.init()
    torch.zeros(1, device=dev)  # the CUDA context, outside every timing
    torch.cuda.synchronize()
    x = torch.randn(64, 1024, device=dev, dtype=torch.bfloat16)
    w = torch.randn(1024, device=dev, dtype=torch.bfloat16)
    lw = torch.randn(512, 1024, device=dev, dtype=torch.bfloat16)
    t = torch.randint(0, 1024, (64,), device=dev)
    q = torch.randn(2, 128, 8, 64, device=dev, dtype=torch.bfloat16)
    pos = torch.arange(128, device=dev)
    ops = [
        ("elementwise silu", lambda: bc.silu(x)),
        ("reduction sum", lambda: bc.sum(x, dim=-1)),
        ("softmax", lambda: bc.softmax(x, dim=-1)),
        ("norm rms_norm", lambda: bc.rms_norm(x, w)),
        ("loss cross_entropy", lambda: bc.cross_entropy(x.float(), t)),
        ("gemm linear", lambda: bc.linear(x, lw)),
        ("attention", lambda: bc.attention(q, q, q, causal=True)),
        ("rope", lambda: bc.rope(q[0], q[0], positions=pos, theta=10000.0)),
        ("embedding", lambda: bc.embedding(t, x)),
        ("sampling", lambda: bc.sample(x.float(), top_k=50, top_p=0.9, seed=1)),
    ]
    print(f"import torch {1e3 * (t1 - t0):.0f} ms, import baracuda {1e3 * (t2 - t1):.0f} ms; "
          f"build {bc.build_info()['cuda_archs']}")
    print(f"{'op':<22} {'first ms':>9} {'second ms':>10}")
    total = 0.0
    for name, fn in ops:
        times = []
        for _ in range(2):
            torch.cuda.synchronize()
            a = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(1e3 * (time.perf_counter() - a))
        total += times[0]
        print(f"{name:<22} {times[0]:>9.2f} {times[1]:>10.3f}")
    print(f"{'all first calls':<22} {total:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
