"""baracuda.jax next to plain JAX (XLA's own fusions and cuBLAS), under jax.jit, in one run.

    python bench/bench_jax.py [--quick]

Each row times a jitted function: `reps` calls back to back, the device drained once at the end
(`block_until_ready`), median over `trials` such loops; the per-call time is the loop's time /
reps. Rows: forward ops, forward + gradient ops, and a training step (RMSNorm -> linear+GELU ->
linear -> cross-entropy, value_and_grad + SGD) in bfloat16. ratio = JAX time / ours (> 1: ours
is faster).
"""
import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import baracuda.jax as bj


def timeit(fn, *args, reps=20, trials=7):
    jax.block_until_ready(fn(*args))  # compile + warm
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times) * 1e6  # us


def ref_rms_norm(x, w, eps=1e-6):
    xf = x.astype(jnp.float32)
    return (xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + eps)).astype(x.dtype) * w


def ref_cross_entropy(logits, target):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    return -jnp.mean(jnp.take_along_axis(logp, target[:, None], 1))


def ref_linear(x, w, activation="none"):
    y = x @ w.T
    return jax.nn.gelu(y, approximate=False) if activation == "gelu" else y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    tokens, d, h, v = (2048, 1024, 2816, 32000) if args.quick else (4096, 2048, 5632, 32000)
    dt = jnp.bfloat16
    k = jax.random.split(jax.random.PRNGKey(0), 8)
    x = jax.random.normal(k[0], (tokens, d), dt)
    w = jnp.ones((d,), dt)
    w1 = (jax.random.normal(k[1], (h, d)) / np.sqrt(d)).astype(dt)
    w2 = (jax.random.normal(k[2], (v, h)) / np.sqrt(h)).astype(dt)
    logits = jax.random.normal(k[3], (tokens, v), dt)
    target = jax.random.randint(k[4], (tokens,), 0, v)

    rows = []

    def row(name, ours, ref, *a):
        t_ours, t_ref = timeit(jax.jit(ours), *a), timeit(jax.jit(ref), *a)
        rows.append((name, t_ours, t_ref))

    row(f"rms_norm fwd [{tokens}, {d}]", bj.rms_norm, ref_rms_norm, x, w)
    row(f"softmax fwd [{tokens}, {v}]", bj.softmax, lambda z: jax.nn.softmax(z, -1), logits)
    row(f"linear+gelu fwd [{tokens}, {d}] x [{h}, {d}]", lambda x, w: bj.linear(x, w, activation="gelu"),
        lambda x, w: ref_linear(x, w, "gelu"), x, w1)
    row(f"rms_norm fwd+bwd [{tokens}, {d}]", jax.grad(lambda x, w: bj.rms_norm(x, w).astype(jnp.float32).sum(),
                                                       argnums=(0, 1)),
        jax.grad(lambda x, w: ref_rms_norm(x, w).astype(jnp.float32).sum(), argnums=(0, 1)), x, w)
    row(f"cross_entropy fwd+bwd [{tokens}, {v}]", jax.value_and_grad(lambda z: bj.cross_entropy(z, target)),
        jax.value_and_grad(lambda z: ref_cross_entropy(z, target)), logits)

    params = {"norm": w, "w1": w1, "w2": w2}

    def step(loss_fn):
        def s(p, x):
            loss, g = jax.value_and_grad(loss_fn)(p, x)
            return loss, jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b.astype(a.dtype), p, g)
        return s

    def ours_loss(p, x):
        hdn = bj.linear(bj.rms_norm(x, p["norm"]), p["w1"], activation="gelu")
        return bj.cross_entropy(bj.linear(hdn, p["w2"]), target).astype(jnp.float32)

    def ref_loss(p, x):
        hdn = ref_linear(ref_rms_norm(x, p["norm"]), p["w1"], "gelu")
        return ref_cross_entropy(ref_linear(hdn, p["w2"]), target)

    row(f"training step (norm, 2 linears, CE; {tokens} tokens)", step(ours_loss), step(ref_loss), params, x)

    dev = jax.devices()[0].device_kind
    print(f"\n### baracuda.jax vs JAX {jax.__version__} (jit, bf16), {dev}\n")
    print("| row | baracuda.jax (us) | JAX (us) | ratio |")
    print("|---|---|---|---|")
    for name, a, b in rows:
        print(f"| {name} | {a:.1f} | {b:.1f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
