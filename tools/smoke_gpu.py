"""Quick device smoke: a few ops against torch, a few timings. Full checks: tools/gpu_check.sh."""
import time

import torch
import torch.nn.functional as F

import baracuda as bc

dev = "cuda"
torch.manual_seed(0)


def check(name, got, ref, tol):
    err = (got.double() - ref.double()).abs().max().item()
    scale = ref.double().abs().max().item() + 1e-30
    print(f"{name:<34} max rel err {err / scale:.2e} {'OK' if err / scale < tol else 'FAIL'}")


x = torch.randn(4097, 33, device=dev, dtype=torch.bfloat16)
check("silu bf16", bc.silu(x), F.silu(x.double()), 1e-2)
check("exp f32 transposed", bc.exp(x.float().t()), torch.exp(x.double().t()), 1e-5)
a = torch.randn(1000, 300, device=dev)
b = torch.randn(300, device=dev)
check("add bcast f32", bc.add(a, b), a.double() + b.double(), 1e-6)
check("cast bf16->f32", bc.cast(x, bc.float32), x.float(), 1e-7)
g = torch.randn(1000, 300, device=dev)
ga, gb = bc.mul_backward(g, a, b)
check("mul_backward grad_a", ga, g.double() * b.double(), 1e-6)
check("mul_backward grad_b (reduced)", gb, (g.double() * a.double()).sum(0), 1e-5)
xs = torch.randn(64, 256, device=dev, dtype=torch.float16)
check("swiglu f16", bc.swiglu(xs), F.silu(xs[:, :128].double()) * xs[:, 128:].double(), 2e-3)
cnd = torch.rand(1000, 300, device=dev) > 0.5
check("where", bc.where(cnd, a, b), torch.where(cnd, a, b), 1e-7)
print("isnan", bool((bc.isnan(torch.tensor([1.0, float("nan")], device=dev)) == torch.tensor([False, True], device=dev)).all()))
try:
    import cupy as cp
    cx = cp.random.randn(1000).astype(cp.float32)
    r = bc.exp(cx)
    print("cupy exp", type(r).__module__, float(cp.abs(r - cp.exp(cx)).max()))
except Exception as e:
    print("cupy failed:", repr(e))
try:
    import jax.numpy as jnp
    jx = jnp.linspace(-3, 3, 1000, dtype=jnp.float32)
    r = bc.exp(jx)
    print("jax exp", type(r).__module__, float(jnp.abs(r - jnp.exp(jx)).max()))
except Exception as e:
    print("jax failed:", repr(e))


def bench(fn, iters=30):
    for _ in range(3):
        fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2] * 1e-3


n = 64 * 2**20
src = torch.empty(4 * n, device=dev, dtype=torch.bfloat16).normal_()
dst = torch.empty_like(src)
copy_bw = 2 * src.numel() * 2 / bench(lambda: dst.copy_(src))
print(f"copy {copy_bw / 1e12:.2f} TB/s")
for name, dt, mk, ours, theirs, nbytes in [
    ("silu bf16", torch.bfloat16, lambda: (torch.randn(n, device=dev, dtype=torch.bfloat16),), lambda y, x: bc.silu(x, out=y), lambda y, x: torch.nn.functional.silu(x), 4 * n),
    ("add bf16", torch.bfloat16, lambda: (torch.randn(n, device=dev, dtype=torch.bfloat16), torch.randn(n, device=dev, dtype=torch.bfloat16)), lambda y, a, b: bc.add(a, b, out=y), lambda y, a, b: torch.add(a, b, out=y), 6 * n),
    ("cast bf16->f32", torch.float32, lambda: (torch.randn(n, device=dev, dtype=torch.bfloat16),), lambda y, x: bc.cast(x, bc.float32, out=y), lambda y, x: y.copy_(x), 6 * n),
    ("add bias bf16", torch.bfloat16, lambda: (torch.randn(n // 4096, 4096, device=dev, dtype=torch.bfloat16), torch.randn(4096, device=dev, dtype=torch.bfloat16)), lambda y, a, b: bc.add(a, b, out=y), lambda y, a, b: torch.add(a, b, out=y), 4 * n),
    ("gelu bf16", torch.bfloat16, lambda: (torch.randn(n, device=dev, dtype=torch.bfloat16),), lambda y, x: bc.gelu(x, out=y), lambda y, x: torch.nn.functional.gelu(x), 4 * n),
    ("mul f32", torch.float32, lambda: (torch.randn(n, device=dev), torch.randn(n, device=dev)), lambda y, a, b: bc.mul(a, b, out=y), lambda y, a, b: torch.mul(a, b, out=y), 12 * n),
    ("outer (N,1)*(1,C) bf16", torch.bfloat16, lambda: (torch.randn(n // 4096, 1, device=dev, dtype=torch.bfloat16), torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)), lambda y, a, b: bc.mul(a, b, out=y), lambda y, a, b: torch.mul(a, b, out=y), 2 * n),
    ("swiglu bf16", torch.bfloat16, lambda: (torch.randn(n // 4096, 8192, device=dev, dtype=torch.bfloat16),), lambda y, x: bc.swiglu(x, out=y), lambda y, x: torch.nn.functional.silu(x[:, :4096]) * x[:, 4096:], 6 * n),
    ("exp transposed bf16", torch.bfloat16, lambda: (torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16).t(),), lambda y, x: bc.exp(x, out=y), lambda y, x: torch.exp(x, out=y), 4 * 8192 * 8192),
]:
    ins = mk()
    shape = torch.broadcast_shapes(*(t.shape for t in ins)) if "swiglu" not in name else (n // 4096, 4096)
    y = torch.empty(shape, device=dev, dtype=dt)
    to = bench(lambda: ours(y, *ins))
    tt = bench(lambda: theirs(y, *ins))
    print(f"{name:<22} ours {nbytes / to / 1e12:.2f} TB/s ({nbytes / to / copy_bw:.0%})  torch {nbytes / tt / 1e12:.2f} TB/s  x{tt / to:.2f}")

x = torch.randn(1024, device=dev)
y = torch.empty_like(x)
plan = bc.ElementwisePlan.select(bc.ElementwiseDescriptor("exp", [bc.TensorSpec((1024,), bc.float32)], bc.TensorSpec((1024,), bc.float32)))
for label, f in [("plan.run", lambda: plan.run(y, x)), ("bc.exp(out=)", lambda: bc.exp(x, out=y)), ("torch.exp(out=)", lambda: torch.exp(x, out=y))]:
    for _ in range(100):
        f()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5000):
        f()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"host overhead {label:<16} {(t1 - t0) / 5000 * 1e6:.2f} us/call")

t = torch.randn(1024, device=dev)
for label, f in [("t.__dlpack__()", lambda: t.__dlpack__()), ("torch._C._to_dlpack", lambda: torch._C._to_dlpack(t)),
                 ("t.data_ptr()", lambda: t.data_ptr()), ("getCurrentRawStream", lambda: torch._C._cuda_getCurrentRawStream(0))]:
    t0 = time.perf_counter()
    for _ in range(20000):
        f()
    print(f"host cost {label:<22} {(time.perf_counter() - t0) / 20000 * 1e6:.2f} us")
