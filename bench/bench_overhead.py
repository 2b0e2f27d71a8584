"""Host time per call of the functional API and the registered torch ops, next to torch's own op,
plus the framework-level rows: a Llama-style decoder block through baracuda ops vs torch eager,
and a small transformers Llama trained with and without baracuda.torch.patch (eager and
torch.compile), in tokens/s.

    python bench/bench_overhead.py                 # every section
    python bench/bench_overhead.py --only host     # host, parts, block, train
    python bench/bench_overhead.py --quick         # smoke run (what tools/gpu_check.sh --quick passes)
    python bench/bench_overhead.py --only train --train-padded --no-compile  # padded batches + their mask
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
    nn_norm = torch.nn.RMSNorm(64, eps=1e-6, device=DEV, dtype=bf)
    bt_norm = bt.RMSNorm(64, eps=1e-6, device=DEV, dtype=bf)
    nn_lin = torch.nn.Linear(64, 64, bias=False, device=DEV, dtype=bf)
    bt_lin = bt.Linear(64, 64, bias=False, device=DEV, dtype=bf)
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
        # the same dispatcher path on both sides: torch's op through its own torch.ops packet
        ("torch.ops.baracuda.silu vs torch.ops.aten.silu", (ops.silu, (x,), {}), (torch.ops.aten.silu, (x,), {})),
        ("torch.ops.baracuda.rms_norm vs torch.ops.aten.rms_norm", (ops.rms_norm, (x, w, 1e-6), {}),
         (torch.ops.aten.rms_norm, (x, (64,), w, 1e-6), {})),
        # the modules (what patch() swaps in); their weights require grad, so both sides record a node
        ("module: RMSNorm(x) vs nn.RMSNorm", (bt_norm, (x,), {}), (nn_norm, (x,), {})),
        ("module: Linear(x) vs nn.Linear", (bt_lin, (x,), {}), (nn_lin, (x,), {})),
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
    # the floor of any op registered with a Python kernel: the dispatcher's boxed call into Python
    # (what every torch.ops.baracuda.* op with an autograd formula pays, at its Autograd key)
    lib = torch.library.Library("bc_bench", "DEF")
    lib.define("empty_like(Tensor x) -> Tensor")
    lib.impl("empty_like", lambda t: torch.empty_like(t), "Autograd")
    lib.impl("empty_like", lambda t: torch.empty_like(t), "CUDA")
    pieces["torch.ops op, Python kernel at Autograd: empty_like(x)"] = (torch.ops.bc_bench.empty_like, (x,), {})
    pieces["same op, .default overload (a compiled graph's call)"] = (torch.ops.bc_bench.empty_like.default, (x,), {})
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


def train_rows(steps, compile_too, rounds=3, profile=False, isolate=False, padded=False):
    """Tokens/s of a small transformers Llama, unpatched and patched, eager and compiled. Every
    variant is built and warmed up first; then `rounds` rounds each time `steps` steps of every
    variant in turn (interleaved, so a drifting host or clock hits all alike), median per variant.
    `graphs` counts the graphs dynamo compiled inside the timed steps (0 unless something
    recompiles). With `profile`, a torch.profiler summary of 3 steps per variant is printed. With
    `padded`, right-padded batches (lengths from S / 2 to S, labels -100 on the padding) and their
    attention mask: transformers' SDPA path with a 4D mask unpatched, packed sequences patched."""
    import transformers
    from torch._dynamo.utils import counters

    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024)
    B, S = 8, 512
    if profile:
        torch._logging.set_logs(recompiles=True, graph_breaks=True)
    g = torch.Generator(device=DEV).manual_seed(1)
    batches = [torch.randint(0, 32000, (B, S), generator=g, device=DEV) for _ in range(4)]
    masks = [None] * 4
    if padded:
        lengths = [torch.randint(S // 2, S + 1, (B,), generator=g, device=DEV) for _ in range(4)]
        masks = [(torch.arange(S, device=DEV)[None, :] < n[:, None]).long() for n in lengths]
    labels = [ids.masked_fill(m == 0, -100) if m is not None else ids for ids, m in zip(batches, masks)]

    def build(patched, compiled):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).to(DEV, torch.bfloat16)
        if patched is not None:
            bt.patch(model, **patched)
        fwd = torch.compile(model) if compiled else model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

        def step(i):
            ids = batches[i % 4]
            loss = fwd(input_ids=ids, labels=labels[i % 4], attention_mask=masks[i % 4]).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        for i in range(3):
            step(i)
        torch.cuda.synchronize()
        return step

    patches = [("unpatched", None), ("patch() default: norms, loss", {}),
               ("patch(mlp=True): norms, MLP, loss", dict(mlp=True))]
    if isolate:  # which swap costs what
        patches += [("patch(loss=False): norms only", dict(loss=False)),
                    ("patch(rms_norm=False): loss only", dict(rms_norm=False)),
                    ("patch(compile_as='baracuda'): our norms inside compiled graphs", dict(compile_as="baracuda"))]
    variants = [(label, kw, compiled) for compiled in ([False, True] if compile_too else [False])
                for label, kw in patches]
    steps_of = [build(kw, compiled) for _, kw, compiled in variants]
    times = [[] for _ in variants]
    graphs = [0 for _ in variants]
    losses = [None for _ in variants]
    for r in range(rounds):
        order = list(enumerate(steps_of))
        for v, step in (order if r % 2 == 0 else order[::-1]):  # alternate, so a drift hits all alike
            before = counters["stats"]["unique_graphs"]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(steps):
                loss = step(i)
            torch.cuda.synchronize()
            times[v].append((time.perf_counter() - t0) / steps)
            graphs[v] += counters["stats"]["unique_graphs"] - before
            losses[v] = loss.item()
    if profile:
        _profile_steps([(("compiled, " if compiled else "eager, ") + label, step)
                        for (label, _, compiled), step in zip(variants, steps_of)])
    rows = []
    for v, (label, kw, compiled) in enumerate(variants):
        if kw is None:
            base, base_loss, base_rounds = B * S / statistics.median(times[v]), losses[v], times[v]
            continue
        tok = B * S / statistics.median(times[v])
        rows.append(dict(row=f"Llama 4x512 B{B} S{S} bf16 train{' padded' if padded else ''}, "
                             f"{'compiled' if compiled else 'eager'}, {label}",
                         ours_tok_s=tok, torch_tok_s=base, speedup=tok / base, last_loss_ours=losses[v],
                         last_loss_torch=base_loss, graphs_in_timing=graphs[v],
                         rounds_ms=[round(t * 1e3, 2) for t in times[v]],
                         unpatched_rounds_ms=[round(t * 1e3, 2) for t in base_rounds]))
    C.free_memory()
    return rows


def _profile_steps(named_steps, top=14):
    """CUDA time by kernel and the host-sync calls of 3 steps of each variant (diagnostics)."""
    from torch.profiler import ProfilerActivity, profile
    for label, step in named_steps:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(3):
                step(i)
            torch.cuda.synchronize()
        ev = prof.key_averages()
        kernels = sorted((e for e in ev if e.device_type == torch.autograd.DeviceType.CUDA),
                         key=lambda e: -e.device_time_total)
        gpu_total = sum(e.device_time_total for e in kernels) / 3
        launches = sum(e.count for e in kernels) / 3
        syncs = {e.key: e.count for e in ev if "Synchronize" in e.key or "Memcpy" in e.key or e.key == "aten::item"}
        print(f"---- profile: {label}: GPU {gpu_total / 1e3:.2f} ms/step, {launches:.0f} kernels/step, syncs {syncs}")
        for e in kernels[:top]:
            print(f"  {e.device_time_total / 3e3:8.3f} ms  x{e.count / 3:5.0f}  {e.key[:110]}")
        ours = sorted((e for e in ev if e.key.startswith("baracuda::") or "CompiledFunction" in e.key
                       or e.key.startswith("Torch-Compiled")), key=lambda e: -e.cpu_time_total)
        for e in ours[:top]:
            print(f"  cpu {e.cpu_time_total / 3e3:8.3f} ms (self {e.self_cpu_time_total / 3e3:6.3f})  "
                  f"x{e.count / 3:4.0f}  {e.key[:90]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="host,parts,block,train")
    ap.add_argument("--host-n", type=int, default=3000)
    ap.add_argument("--host-reps", type=int, default=5)
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("--train-rounds", type=int, default=5)
    ap.add_argument("--profile-train", action="store_true", help="print a profiler summary of every variant")
    ap.add_argument("--train-isolate", action="store_true", help="also time the norms-only, loss-only and compile_as='baracuda' patches")
    ap.add_argument("--train-padded", action="store_true",
                    help="right-padded training batches with their attention mask (patch's packed-sequence path)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smoke run: short host loops, 3 training steps, eager only")
    args = ap.parse_args()
    if args.quick:
        args.host_n, args.host_reps, args.train_steps, args.no_compile, args.train_rounds = 300, 2, 3, True, 1
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
        rows = train_rows(args.train_steps, not args.no_compile, args.train_rounds, args.profile_train,
                          args.train_isolate, args.train_padded)
        data["train"] = rows
        hdr = ["training", "patched (tok/s)", "unpatched (tok/s)", "speedup", "loss (ours / torch)",
               "graphs compiled while timed"]
        body = [[r["row"], C.fmt(r["ours_tok_s"], ".0f"), C.fmt(r["torch_tok_s"], ".0f"), C.fmt(r["speedup"], ".2f"),
                 f"{r['last_loss_ours']:.4f} / {r['last_loss_torch']:.4f}", str(r["graphs_in_timing"])] for r in rows]
        md += ["", C.markdown_table(hdr, body)]
        text.append(C.text_table(hdr, body))
    data["elapsed_s"] = time.time() - t0
    out = "\n\n".join(text)
    print(f"GPU: {info['name']}\n{out}")
    C.write_outputs("bench_overhead", "\n".join(md), data, out)


if __name__ == "__main__":
    main()
