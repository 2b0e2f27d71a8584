"""Sampling: bc.sample (radix-select thresholds, no sort) next to torch's sort-based top-k / top-p
sampler (sort the vocabulary, mask, softmax, cumsum, multinomial), CUDA events, median, L2 flushed.

    python bench/bench_sampling.py [--quick]
"""
import argparse
import os
import re
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import baracuda as bc  # noqa: E402


def torch_sample(logits, top_k, top_p, temperature=1.0):
    x = logits.float() / temperature
    srt, idx = x.sort(-1, descending=True)
    if top_k:
        srt[:, top_k:] = -float("inf")
    if top_p < 1:
        p = srt.softmax(-1)
        above = p.cumsum(-1) - p
        srt = srt.masked_fill(above >= top_p, -float("inf"))
    p = srt.softmax(-1)
    pick = torch.multinomial(p, 1)
    return idx.gather(-1, pick).squeeze(-1)


def timed(fn, reps):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", default="", help="regex on the row names")
    args = ap.parse_args()
    reps = 20 if args.quick else 100
    rows = [(64, 128256, torch.float32, 50, 0.9), (64, 128256, torch.bfloat16, 50, 0.9),
            (64, 128256, torch.float32, 0, 0.9), (64, 128256, torch.float32, 50, 1.0),
            (1, 128256, torch.float32, 50, 0.9), (256, 32000, torch.float32, 50, 0.9)]
    print(f"{'row':<34} {'ours us':>9} {'torch us':>9} {'speedup':>8}")
    results = []
    for b, v, dt, k, p in rows:
        if not re.search(args.rows, f"b{b} V{v} {str(dt)[6:]} k{k} p{p}"):
            continue
        x = torch.randn(b, v, device="cuda", dtype=dt) * 4
        for _ in range(3):
            bc.sample(x, top_k=k, top_p=p, seed=1)
            torch_sample(x, k, p)
        ours = timed(lambda: bc.sample(x, top_k=k, top_p=p, seed=1), reps)
        ref = timed(lambda: torch_sample(x, k, p), reps)
        name = f"b{b} V{v} {str(dt)[6:]} k{k} p{p}"
        print(f"{name:<34} {ours:9.1f} {ref:9.1f} {ref / ours:7.2f}x")
        results.append(dict(key=name, ours_us=ours, torch_us=ref, speedup=ref / ours))
    info = C.device_info()
    headers = ["row", "ours us", "torch us", "speedup"]
    table = [[r["key"], C.fmt(r["ours_us"]), C.fmt(r["torch_us"]), C.fmt(r["speedup"], ".2f") + "x"] for r in results]
    head = f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}\n"
    C.write_outputs("bench_sampling", "# bench_sampling\n\n" + head + "\n" + C.markdown_table(headers, table),
                    {"device": info, "rows": results}, head + "\n" + C.text_table(headers, table))


if __name__ == "__main__":
    main()
