"""Host time per call of the functional API and the registered torch ops, next to torch's own op,
plus the framework-level rows: a Llama-style decoder block through baracuda ops vs torch eager,
and a small transformers Llama trained with and without baracuda.torch.patch (eager and
torch.compile), in tokens/s.

    python bench/bench_overhead.py                 # every section
    python bench/bench_overhead.py --only host     # host, parts, block, train
    python bench/bench_overhead.py --quick         # smoke run (what tools/gpu_check.sh --quick passes)
    OUT=/tmp/out python bench/bench_overhead.py    # also writes $OUT/bench_overhead.{md,json,txt}

Host rows: back-to-back calls on tiny tensors (the GPU is idle waiting for the host), timed with
perf_counter over n calls + one synchronize; median of interleaved repetitions (common.time_host).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402

DEV = "cuda"


def host_rows(n, reps):
    bf = torch.bfloat16
    x = torch.randn(64, 64, device=DEV, dtype=bf)
    y = torch.empty_like(x)
    w = torch.ones(64, device=DEV, dtype=bf)
    lw = torch.randn(64, 64, device=DEV, dtype=bf)
    logits = torch.randn(8, 512, device=DEV, dtype=bf)
    tgt = torch.randint(0, 512, (8,), device=DEV)
    spec = bc.TensorSpec(x.shape, bc.bfloat16)
    plan = bc.ElementwisePlan.select(bc.ElementwiseDescriptor("exp", [spec], spec))
    ops = torch.ops.baracuda
    xg = x.clone().requires_grad_()  # calls that record a graph node (the training path)
    rows = [  # (row, ours: fn, args, kwargs; torch: fn, args, kwargs)
        ("exp(x, out=y)", (bc.exp, (x,), dict(out=y)), (torch.exp, (x,), dict(out=y))),
        ("plan.run(y, x) vs exp(out=)", (plan.run, (y, x), {}), (torch.exp, (x,), dict(out=y))),
        ("exp(x)", (bc.exp, (x,), {}), (torch.exp, (x,), {})),
        ("add(x, x)", (bc.add, (x, x), {}), (torch.add, (x, x), {})),
        ("softmax(x, -1)", (bc.softmax, (x, -1), {}), (torch.softmax, (x, -1), {})),
        ("rms_norm(x, w)", (bc.rms_norm, (x, w), {}), (F.rms_norm, (x, (64,), w, 1e-6), {})),
        ("linear(x, w)", (bc.linear, (x, lw), {}), (F.linear, (x, lw), {})),
        ("sum(x, dim=-1)", (bc.sum, (x,), dict(dim=-1)), (torch.sum, (x,), dict(dim=-1))),
        ("cross_entropy", (bc.cross_entropy, (logits, tgt), {}), (F.cross_entropy, (logits, tgt), {})),
        ("torch.ops.baracuda.silu", (ops.silu, (x,), {}), (F.silu, (x,), {})),
        ("torch.ops.baracuda.rms_norm", (ops.rms_norm, (x, w, 1e-6), {}), (F.rms_norm, (x, (64,), w, 1e-6), {})),
        ("torch.ops.baracuda.softmax", (ops.softmax, (x, -1), {}), (torch.softmax, (x, -1), {})),
        ("torch.ops.baracuda.linear", (ops.linear, (x, lw, None, "none"), {}), (F.linear, (x, lw), {})),
        ("autograd: rms_norm(xg, w)", (bc.rms_norm, (xg, w), {}), (F.rms_norm, (xg, (64,), w, 1e-6), {})),
        ("autograd: linear(xg, w)", (bc.linear, (xg, lw), {}), (F.linear, (xg, lw), {})),
        ("autograd: silu(xg)", (bc.silu, (xg,), {}), (F.silu, (xg,), {})),
    ]
    calls = {}
    for name, ours, theirs in rows:
        calls[("ours", name)] = ours
        calls[("torch", name)] = theirs
    res = C.time_host(calls, n=n, reps=reps)
    out = []
    for name, _, _ in rows:
        a, b = res[("ours", name)]["us_per_call"], res[("torch", name)]["us_per_call"]
        out.append(dict(row=name, ours_us=a, torch_us=b, ratio=a / b))
    return out


def parts_rows(n, reps):
    """Where a functional call's host time goes: its pieces timed alone (ours only), to read next to
    the host rows (64 x 64 bf16)."""
    x = torch.randn(64, 64, device=DEV, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    lw = torch.randn(64, 64, device=DEV, dtype=torch.bfloat16)
    call = bc._C.elementwise_call
    pieces = {
        "core entry: _C.elementwise_call(exp, into y)": (call, ("exp", y, (x,), {}, None, None), {}),
        "torch.empty_like(x)": (torch.empty_like, (x,), {}),
        "x.new_empty(x.shape)": (x.new_empty, (x.shape,), {}),
        "torch._C._to_dlpack(x) (the capsule import)": (torch._C._to_dlpack, (x,), {}),
        "torch.compiler.is_compiling()": (torch.compiler.is_compiling, (), {}),
        "core entry: _C.gemm_call (linear, into y)": (bc._C.gemm_call, (y, x, lw.t(), 1.0, 0.0, "none", None, None,
                                                                       None, None, None, None, False, None,
                                                                       bc._interop.workspace_allocator(x)), {}),
        "bc.exp(x, out=y)": (bc.exp, (x,), dict(out=y)),
        "bc.linear(x, lw)": (bc.linear, (x, lw), {}),
        "lw.t()": (lw.t, (), {}),
        "x.new_empty_strided((64, 64), (64, 1))": (x.new_empty_strided, ((64, 64), (64, 1)), {}),
    }
    res = C.time_host(pieces, n=n, reps=reps)
    return [dict(row=k, us=v["us_per_call"]) for k, v in res.items()]


def _gpu_time(fn, iters=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(ts)


def block_rows():
    """A Llama-style decoder block (bf16, batch 2, seq 512, hidden 2048, 16 heads, intermediate 5632),
    forward only, written once with torch ops and once with baracuda ops (attention scores through
    matmul + softmax in both: the attention family is not in yet)."""
    torch.manual_seed(0)
    bf = torch.bfloat16
    B, S, H, NH, I = 2, 512, 2048, 16, 5632
    D = H // NH
    x = torch.randn(B, S, H, device=DEV, dtype=bf)
    w_n1, w_n2 = torch.ones(H, device=DEV, dtype=bf), torch.ones(H, device=DEV, dtype=bf)
    wqkv = torch.randn(3 * H, H, device=DEV, dtype=bf) * H ** -0.5
    wo = torch.randn(H, H, device=DEV, dtype=bf) * H ** -0.5
    wgu = torch.randn(2 * I, H, device=DEV, dtype=bf) * H ** -0.5
    wd = torch.randn(H, I, device=DEV, dtype=bf) * I ** -0.5

    def torch_block(x):
        h = F.rms_norm(x, (H,), w_n1, 1e-6)
        q, k, v = F.linear(h, wqkv).view(B, S, 3, NH, D).permute(2, 0, 3, 1, 4).contiguous()
        p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * D ** -0.5, dim=-1)
        a = torch.matmul(p, v).transpose(1, 2).reshape(B, S, H)
        x = x + F.linear(a, wo)
        h = F.rms_norm(x, (H,), w_n2, 1e-6)
        g, u = F.linear(h, wgu).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, wd)

    def bc_block(x):
        h = bc.rms_norm(x, w_n1)
        q, k, v = bc.linear(h, wqkv).view(B, S, 3, NH, D).permute(2, 0, 3, 1, 4).contiguous()
        p = bc.softmax(bc.matmul(q, k.transpose(-1, -2), alpha=D ** -0.5), dim=-1)
        a = bc.matmul(p, v).transpose(1, 2).reshape(B, S, H)
        h, x = bc.rms_norm(bc.linear(a, wo), w_n2, residual=x)
        gu = bc.linear(h, wgu)
        return bc.add(x, bc.linear(bc.swiglu(gu), wd))

    t_torch = _gpu_time(lambda: torch_block(x))
    t_bc = _gpu_time(lambda: bc_block(x))
    err = (bc_block(x).float() - torch_block(x).float()).abs().max().item()
    return [dict(row="Llama block forward (B2 S512 H2048)", ours_ms=t_bc * 1e3, torch_ms=t_torch * 1e3,
                 speedup=t_torch / t_bc, max_abs_diff=err)]


def train_rows(steps, compile_too):
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024)
    B, S = 8, 512
    rows = []

    def run(patched, compiled):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).to(DEV, torch.bfloat16)
        if patched:
            bt.patch(model, **patched)
        fwd = torch.compile(model) if compiled else model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        g = torch.Generator(device=DEV).manual_seed(1)
        batches = [torch.randint(0, 32000, (B, S), generator=g, device=DEV) for _ in range(4)]

        def step(i):
            ids = batches[i % 4]
            loss = fwd(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        for i in range(3):
            step(i)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(steps):
            loss = step(i)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / steps
        C.free_memory()
        return B * S / dt, loss.item()

    variants = [("patch() default: norms, loss", {}), ("patch(mlp=True): norms, MLP, loss", dict(mlp=True))]
    for compiled in ([False, True] if compile_too else [False]):
        base, lb = run(None, compiled)
        for label, kw in variants:
            ours, lo = run(kw, compiled)
            torch._dynamo.reset()
            rows.append(dict(row=f"Llama 4x512 B{B} S{S} bf16 train, {'compiled' if compiled else 'eager'}, {label}",
                             ours_tok_s=ours, torch_tok_s=base, speedup=ours / base, last_loss_ours=lo,
                             last_loss_torch=lb))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="host,parts,block,train")
    ap.add_argument("--host-n", type=int, default=3000)
    ap.add_argument("--host-reps", type=int, default=5)
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smoke run: short host loops, 3 training steps, eager only")
    args = ap.parse_args()
    if args.quick:
        args.host_n, args.host_reps, args.train_steps, args.no_compile = 300, 2, 3, True
    only = set(args.only.split(","))
    info = C.device_info()
    t0 = time.time()
    data = {"device": info}
    md = [f"GPU: {info['name']}, torch {info['torch']}"]
    text = []
    if "host" in only:
        rows = host_rows(args.host_n, args.host_reps)
        data["host"] = rows
        hdr = ["host time per call", "baracuda (us)", "torch (us)", "ratio"]
        body = [[r["row"], C.fmt(r["ours_us"], ".2f"), C.fmt(r["torch_us"], ".2f"), C.fmt(r["ratio"], ".2f")]
                for r in rows]
        md += ["", C.markdown_table(hdr, body)]
        text.append(C.text_table(hdr, body))
    if "parts" in only:
        rows = parts_rows(args.host_n, args.host_reps)
        data["parts"] = rows
        hdr = ["host time of a piece", "us"]
        body = [[r["row"], C.fmt(r["us"], ".2f")] for r in rows]
        md += ["", C.markdown_table(hdr, body)]
        text.append(C.text_table(hdr, body))
    if "block" in only:
        rows = block_rows()
        data["block"] = rows
        hdr = ["decoder block", "baracuda (ms)", "torch (ms)", "speedup", "max |diff|"]
        body = [[r["row"], C.fmt(r["ours_ms"], ".3f"), C.fmt(r["torch_ms"], ".3f"), C.fmt(r["speedup"], ".2f"),
                 C.fmt(r["max_abs_diff"], ".3g")] for r in rows]
        md += ["", C.markdown_table(hdr, body)]
        text.append(C.text_table(hdr, body))
    if "train" in only:
        rows = train_rows(args.train_steps, not args.no_compile)
        data["train"] = rows
        hdr = ["training", "patched (tok/s)", "unpatched (tok/s)", "speedup", "loss (ours / torch)"]
        body = [[r["row"], C.fmt(r["ours_tok_s"], ".0f"), C.fmt(r["torch_tok_s"], ".0f"), C.fmt(r["speedup"], ".2f"),
                 f"{r['last_loss_ours']:.4f} / {r['last_loss_torch']:.4f}"] for r in rows]
        md += ["", C.markdown_table(hdr, body)]
        text.append(C.text_table(hdr, body))
    data["elapsed_s"] = time.time() - t0
    out = "\n\n".join(text)
    print(f"GPU: {info['name']}\n{out}")
    C.write_outputs("bench_overhead", "\n".join(md), data, out)


if __name__ == "__main__":
    main()
