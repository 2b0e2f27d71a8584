#!/usr/bin/env python3
"""Greedy generation with a transformers Llama, run by a small paged-KV-cache engine whose layer
ops are baracuda's: prefill of packed prompts, then decode steps over the cache's pages.

    python examples/generate.py                         # a random 4-layer Llama, 8 prompts, 128 tokens, GPU
    python examples/generate.py --dtype bfloat16        # bf16 weights and cache
    python examples/generate.py --ops torch --device cpu   # the same engine on torch reference ops

Per layer: RMSNorm (`bc.rms_norm`), one fused q/k/v projection (`bc.linear`), RoPE on q and k in
place in that projection's output with the rotated keys and the values written to the pages in the
same launch (`bc.rope` with `k_cache` / `v_cache` / `slot_mapping`), attention (`bc.attention` over the packed prompts at prefill,
`bc.paged_attention` over the pages at decode), the output projection, the residual adds
(`bc.add`), the MLP as one fused gate/up projection and `bc.swiglu`, the embedding lookup
(`bc.embedding`) and the greedy pick (`bc.argmax`). With --graph the decode step is captured once
in a CUDA graph and replayed for every new token (the lengths, slots and positions live on the
device, so a replay advances every request by one token with no host work). The tokens are
compared with transformers' own `generate` on the same model (skip: --no-check).
"""
from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F


class TorchOps:
    """Reference ops on torch (any device): what the engine's logic is checked with."""

    name = "torch"

    def __init__(self, model):
        rot = model.model.rotary_emb
        self.inv_freq = rot.inv_freq.float()
        self.attention_scaling = float(getattr(rot, "attention_scaling", 1.0))

    def rms_norm(self, x, w, eps):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(x.dtype)

    def linear(self, x, w):
        return x @ w.t()

    def add(self, a, b):
        return a + b

    def swiglu(self, gate, up):
        return F.silu(gate) * up

    def rope(self, q, k, positions):
        """q [T, Hq, D], k [T, Hkv, D] (views of the projection's output) rotated in place."""
        ang = positions.float()[:, None] * self.inv_freq.to(q.device)[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        cos = (emb.cos() * self.attention_scaling).to(q.dtype)[:, None, :]
        sin = (emb.sin() * self.attention_scaling).to(q.dtype)[:, None, :]
        for t in (q, k):
            h = t.shape[-1] // 2
            rot = torch.cat((-t[..., h:], t[..., :h]), dim=-1)
            t.copy_(t * cos + rot * sin)

    def argmax(self, logits):
        return logits.argmax(-1)

    def embedding(self, tokens, table):
        return table[tokens]

    def kv_cache_append(self, k, v, kc, vc, slots):
        kc.view(-1, *kc.shape[2:])[slots] = k
        vc.view(-1, *vc.shape[2:])[slots] = v

    def rope_append(self, q, k, v, kc, vc, positions, slots):
        self.rope(q, k, positions)
        self.kv_cache_append(k, v, kc, vc, slots)

    def prefill_attention(self, q, k, v, cu, max_len):
        out = torch.empty_like(q)
        for b in range(cu.shape[0] - 1):
            s, e = int(cu[b]), int(cu[b + 1])
            o = F.scaled_dot_product_attention(q[s:e].transpose(0, 1)[None], k[s:e].transpose(0, 1)[None],
                                               v[s:e].transpose(0, 1)[None], is_causal=True, enable_gqa=True)
            out[s:e] = o[0].transpose(0, 1)
        return out

    def paged_attention(self, q, kc, vc, table, lens):
        """q [B, Hq, D]: each request's one new token over its pages."""
        out = torch.empty_like(q)
        page = kc.shape[1]
        for b in range(q.shape[0]):
            n = int(lens[b])
            j = torch.arange(n, device=q.device)
            pg = table[b, j // page].long()
            k, v = kc[pg, j % page], vc[pg, j % page]  # [n, Hkv, D]
            o = F.scaled_dot_product_attention(q[b][None, :, None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                               enable_gqa=True)
            out[b] = o[0, :, 0]
        return out


class BaracudaOps:
    """The same ops through baracuda (CUDA tensors)."""

    name = "baracuda"

    def __init__(self, model):
        import baracuda as bc
        import baracuda.torch as bt

        self.bc = bc
        # theta and scaling from transformers 4's rope_theta / rope_scaling or 5's rope_parameters
        rot = bt.RotaryEmbedding.from_config(model.config)
        self.theta, self.scaling = rot.theta, rot.scaling

    def rms_norm(self, x, w, eps):
        return self.bc.rms_norm(x, w, eps)

    def linear(self, x, w):
        return self.bc.linear(x, w)

    def add(self, a, b):
        return self.bc.add(a, b)

    def swiglu(self, gate, up):
        return self.bc.swiglu(gate, up)

    def rope(self, q, k, positions):
        self.bc.rope(q, k, positions=positions, theta=self.theta, scaling=self.scaling, inplace=True)

    def argmax(self, logits):
        return self.bc.argmax(logits, dim=-1)

    def embedding(self, tokens, table):
        return self.bc.embedding(tokens, table)

    def kv_cache_append(self, k, v, kc, vc, slots):
        self.bc.kv_cache_append(k, v, kc, vc, slots)

    def rope_append(self, q, k, v, kc, vc, positions, slots):
        """q and k rotated in place, the rotated k and v written to their cache slots: one launch."""
        self.bc.rope(q, k, positions=positions, theta=self.theta, scaling=self.scaling, inplace=True, k_cache=kc, v=v,
                     v_cache=vc, slot_mapping=slots)

    def prefill_attention(self, q, k, v, cu, max_len):
        return self.bc.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len,
                                 max_seqlen_k=max_len)

    def paged_attention(self, q, kc, vc, table, lens):
        return self.bc.paged_attention(q, kc, vc, table, lens)


class PagedLlama:
    """A LlamaForCausalLM's weights (q/k/v and gate/up fused) and a paged KV cache per layer."""

    def __init__(self, model, ops, *, page_size=16, max_batch=8, max_len=1024):
        cfg = model.config
        self.ops = ops
        self.hq = cfg.num_attention_heads
        self.hkv = cfg.num_key_value_heads
        self.d = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.hq
        self.eps = cfg.rms_norm_eps
        self.page_size = page_size
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype
        m = model.model
        self.embed = m.embed_tokens.weight
        self.norm = m.norm.weight
        self.lm_head = model.lm_head.weight
        self.layers = []
        for layer in m.layers:
            a, mlp = layer.self_attn, layer.mlp
            self.layers.append(dict(
                ln1=layer.input_layernorm.weight, ln2=layer.post_attention_layernorm.weight,
                qkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).contiguous(),
                o=a.o_proj.weight, gate_up=torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).contiguous(),
                down=mlp.down_proj.weight))
        self.pages_per_seq = (max_len + page_size - 1) // page_size
        pages = max_batch * self.pages_per_seq
        shape = (pages, page_size, self.hkv, self.d)
        self.caches = [(torch.zeros(shape, device=self.device, dtype=self.dtype),
                        torch.zeros(shape, device=self.device, dtype=self.dtype)) for _ in self.layers]
        # request b owns pages [b * pages_per_seq, (b + 1) * pages_per_seq), shuffled: any order works
        perm = torch.randperm(pages, generator=torch.Generator().manual_seed(0)).to(torch.int32)
        self.table = perm.view(max_batch, self.pages_per_seq).to(self.device)
        self.lens = torch.zeros(max_batch, dtype=torch.int32, device=self.device)

    def _slots(self, seq, pos):
        """Cache slots (int64) of tokens at positions `pos` of requests `seq`."""
        page = self.table[seq, pos // self.page_size].long()
        return page * self.page_size + pos % self.page_size

    def _layers(self, h, positions, slots, attend):
        o = self.ops
        hq, hkv, d = self.hq, self.hkv, self.d
        for w, (kc, vc) in zip(self.layers, self.caches):
            x = o.rms_norm(h, w["ln1"], self.eps)
            qkv = o.linear(x, w["qkv"]).view(-1, hq + 2 * hkv, d)
            q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
            o.rope_append(q, k, v, kc, vc, positions, slots)
            a = attend(q, k, v, kc, vc).reshape(h.shape[0], hq * d)
            h = o.add(h, o.linear(a, w["o"]))
            x = o.rms_norm(h, w["ln2"], self.eps)
            gu = o.linear(x, w["gate_up"])
            inter = gu.shape[-1] // 2
            h = o.add(h, o.linear(o.swiglu(gu[:, :inter], gu[:, inter:]), w["down"]))
        return h

    def _logits(self, h):
        return self.ops.linear(self.ops.rms_norm(h, self.norm, self.eps), self.lm_head).float()

    def prefill(self, prompts):
        """prompts: lists of token ids (request b = prompts[b]), packed into one pass; returns each
        request's last-position logits [B, vocab]."""
        dev = self.device
        lens = [len(p) for p in prompts]
        tokens = torch.tensor([t for p in prompts for t in p], device=dev)
        seq = torch.cat([torch.full((n,), b, device=dev) for b, n in enumerate(lens)])
        pos = torch.cat([torch.arange(n, device=dev) for n in lens])
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=dev)
        max_len = max(lens)
        h = self.ops.embedding(tokens, self.embed)
        h = self._layers(h, pos, self._slots(seq, pos),
                         lambda q, k, v, kc, vc: self.ops.prefill_attention(q, k, v, cu, max_len))
        self.lens[:len(prompts)] = torch.tensor(lens, dtype=torch.int32, device=dev)
        return self._logits(h[cu[1:].long() - 1])

    def decode(self, tokens):
        """One new token per request (tokens [B]); returns the logits [B, vocab]."""
        b = tokens.shape[0]
        seq = torch.arange(b, device=self.device)
        pos = self.lens[:b].long()
        self.lens[:b] += 1  # the new token's key is appended before attention reads the pages
        lens, table = self.lens[:b], self.table[:b]
        h = self.ops.embedding(tokens, self.embed)
        h = self._layers(h, pos, self._slots(seq, pos),
                         lambda q, k, v, kc, vc: self.ops.paged_attention(q, kc, vc, table, lens))
        return self._logits(h)

    def capture_decode(self, tokens):
        """A CUDA graph of one greedy decode step on the static buffer `tokens` [B] (int64): a replay
        appends each request's token, attends, and writes the next greedy token back into
        `tokens`. The step is warmed up on a side stream first, as torch recommends before a capture
        (its length increment undone; the key / value it wrote sit in the slot the first replay
        overwrites); the capture itself records without running."""
        lens0 = self.lens.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.decode(tokens.clone())
        torch.cuda.current_stream().wait_stream(side)
        self.lens.copy_(lens0)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            tokens.copy_(self.ops.argmax(self.decode(tokens)))
        return graph

    @torch.no_grad()
    def generate(self, prompts, new_tokens, graph=False):
        out = [[] for _ in prompts]
        nxt = self.ops.argmax(self.prefill(prompts))
        if graph:
            tokens = nxt.long().clone()
            step_graph = self.capture_decode(tokens)
            got = torch.empty(new_tokens, len(prompts), dtype=torch.long, device=self.device)
            for step in range(new_tokens):
                got[step].copy_(tokens)
                if step + 1 < new_tokens:
                    step_graph.replay()
            return got.t().tolist()
        for step in range(new_tokens):
            for b, t in enumerate(nxt.tolist()):
                out[b].append(t)
            if step + 1 < new_tokens:
                nxt = self.ops.argmax(self.decode(nxt))
        return out


def random_llama(device, dtype, *, layers=4, hidden=1024, heads=16, kv_heads=4, vocab=32000, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2816, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=4096,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    return model


def reference_tokens(model, prompts, new_tokens):
    """transformers' greedy generate, one prompt at a time (no padding)."""
    out = []
    for p in prompts:
        ids = torch.tensor([p], device=next(model.parameters()).device)
        g = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        out.append(g[0, len(p):].tolist())
    return out


def prompts_of(n, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 17, 33, 64, 1, 100, 9, 48][:n] + [12] * max(0, n - 8)
    return [torch.randint(1, vocab, (m,), generator=g).tolist() for m in lengths]


def match_fraction(a, b):
    same = sum(x == y for sa, sb in zip(a, b) for x, y in zip(sa, sb))
    return same / max(1, sum(len(s) for s in a))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", choices=("baracuda", "torch"), default="baracuda")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--no-check", action="store_true", help="skip transformers' generate")
    ap.add_argument("--graph", action="store_true", help="decode through one captured CUDA graph (CUDA only)")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    model = random_llama(args.device, dtype)
    ops = (BaracudaOps if args.ops == "baracuda" else TorchOps)(model)
    prompts = prompts_of(args.prompts, model.config.vocab_size)
    engine = PagedLlama(model, ops, max_batch=len(prompts), max_len=max(map(len, prompts)) + args.new_tokens)
    t0 = time.time()
    got = engine.generate(prompts, args.new_tokens, graph=args.graph)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.time() - t0
    print(f"{ops.name} ops, {args.dtype}: {len(prompts)} prompts x {args.new_tokens} tokens in {dt:.2f} s")
    if args.no_check:
        return 0
    want = reference_tokens(model, prompts, args.new_tokens)
    frac = match_fraction(got, want)
    first = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None) for a, b in zip(got, want)]
    print(f"greedy tokens identical to transformers' generate: {frac:.2%} (first difference per prompt: {first})")
    need = 1.0 if args.dtype == "float32" else 0.99
    return 0 if frac >= need else 1


if __name__ == "__main__":
    sys.exit(main())
