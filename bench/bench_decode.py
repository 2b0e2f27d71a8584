#!/usr/bin/env python3
"""Decode throughput: the small Llama of examples/generate.py (4 layers, hidden 1024, 16 q / 4 kv heads,
vocabulary 32000), batch 8, bf16, its decode step through baracuda's ops captured in one CUDA graph,
next to transformers' eager decode (model(next_token, past_key_values=cache) per step, greedy) on the
same weights, same run.

    python3 bench/bench_decode.py [--steps 128] [--batch 8] [--prompt 64]
    OUT=/tmp/out python3 bench/bench_decode.py   # also $OUT/bench_decode.{md,json,txt}

Both sides prefill the same prompts first (untimed); tokens/s = batch x steps / the decode time.
The issue's target: ours >= 2x transformers eager.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import baracuda as bc  # noqa: E402

_GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "generate.py")


def load_generate():
    spec = importlib.util.spec_from_file_location("baracuda_example_generate", _GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


@torch.no_grad()
def ours(g, model, prompts, steps, graph):
    engine = g.PagedLlama(model, g.BaracudaOps(model), max_batch=len(prompts), max_len=len(prompts[0]) + steps + 8)
    tokens = engine.ops.argmax(engine.prefill(prompts)).long().clone()
    if graph:
        step = engine.capture_decode(tokens)
        run = step.replay
    else:
        def run():
            tokens.copy_(engine.ops.argmax(engine.decode(tokens)))
    for _ in range(3):  # warm: the lengths advance, as in generation
        run()
    return timed(lambda: [run() for _ in range(steps)])


@torch.no_grad()
def transformers_eager(model, prompts, steps):
    from transformers import DynamicCache

    ids = torch.tensor(prompts, device="cuda")
    cache = DynamicCache()
    out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)

    def step():
        nonlocal nxt
        o = model(input_ids=nxt, past_key_values=cache, use_cache=True)
        nxt = o.logits[:, -1].argmax(-1, keepdim=True)

    for _ in range(3):
        step()
    return timed(lambda: [step() for _ in range(steps)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="32 steps")
    ap.add_argument("--rows", default="", help="regex on the path names (baracuda graph / eager, transformers)")
    args = ap.parse_args()
    steps = 32 if args.quick else args.steps
    g = load_generate()
    model = g.random_llama("cuda", torch.bfloat16)
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, model.config.vocab_size, (args.prompt,), generator=gen).tolist()
               for _ in range(args.batch)]
    info = C.device_info()
    rows = []
    for name, fn in ((n, f) for n, f in (("baracuda, CUDA graph", lambda: ours(g, model, prompts, steps, True)),
                     ("baracuda, eager", lambda: ours(g, model, prompts, steps, False)),
                     ("transformers, eager", lambda: transformers_eager(model, prompts, steps)))
                     if re.search(args.rows, n) or n.startswith("transformers")):
        t = min(fn() for _ in range(2))
        rows.append(dict(key=name, seconds=t, tokens_per_s=args.batch * steps / t, step_us=t / steps * 1e6))
    base = rows[-1]["tokens_per_s"]
    for r in rows:
        r["speedup"] = r["tokens_per_s"] / base
    headers = ["path", "tokens/s", "us per step", "vs transformers"]
    table = [[r["key"], C.fmt(r["tokens_per_s"], ".0f"), C.fmt(r["step_us"]), C.fmt(r["speedup"], ".2f") + "x"]
             for r in rows]
    head = (f"GPU: {info['name']}; torch {info['torch']}; baracuda {bc.__version__}; bf16 Llama 4 x 1024, "
            f"batch {args.batch}, prompt {args.prompt}, {steps} decode steps\n")
    text = head + "\n" + C.text_table(headers, table)
    C.write_outputs("bench_decode", "# bench_decode\n\n" + head + "\n" + C.markdown_table(headers, table),
                    {"device": info, "rows": rows}, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
