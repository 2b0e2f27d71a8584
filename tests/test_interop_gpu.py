"""How baracuda meets the frameworks on a GPU: torch, CuPy and JAX inputs and outputs,
zero-copy, streams (explicit and current), other devices, the plan API's select / run /
refusals / workspace, and capture in torch CUDA graphs.
"""
import math
import os
import sys
import zlib

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # before any JAX import: share the GPU

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
np = pytest.importorskip("numpy")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _ref.py, whatever the import mode
import _ref as R  # noqa: E402  (needs torch and baracuda)
from _ref import DEV  # noqa: E402

errors = bc.errors
S = bc.TensorSpec
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
SLEEP = int(5e8)  # GPU clock cycles (~0.25 s): keeps a stream busy while we look at another one


def _plan(op, inputs, out, params=None, pref=None):
    return bc.ElementwisePlan.select(bc.ElementwiseDescriptor(op, inputs, out, params or {}), pref)


def _raises(exc, fn, *needles):
    with pytest.raises(exc) as info:
        fn()
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


# ---- the same op from every framework -------------------------------------------------------------

# name: (numpy input specs (dtype, shape), call, float64 torch reference of the torch inputs)
CASES = {
    "exp": ([("f4", (33, 65))], lambda x: bc.exp(x), lambda x: torch.exp(x.double())),
    "add-bias": ([("f4", (64, 48)), ("f4", (48,))], lambda a, b: bc.add(a, b, alpha=2.0),
                 lambda a, b: a.double() + 2 * b.double()),
    "mul-scalar": ([("f4", (64, 48))], lambda a: bc.mul(a, 2.5), lambda a: a.double() * 2.5),
    "where": ([("?", (33, 65)), ("f4", (33, 65)), ("f4", (65,))], lambda c, a, b: bc.where(c, a, b),
              lambda c, a, b: torch.where(c, a.double(), b.double())),
    "swiglu": ([("f4", (16, 64))], lambda x: bc.swiglu(x),
               lambda x: torch.nn.functional.silu(x[:, :32].double()) * x[:, 32:].double()),
    "cast-f16": ([("f4", (33, 65))], lambda x: bc.cast(x, bc.float16), lambda x: x.half().double()),
    "lt": ([("f4", (33, 65)), ("f4", (65,))], lambda a, b: bc.lt(a, b), lambda a, b: a < b),
    "int-add": ([("i4", (33, 65)), ("i4", (33, 65))], lambda a, b: bc.add(a, b), lambda a, b: a.long() + b.long()),
    "mul_backward": ([("f4", (64, 48)), ("f4", (64, 48)), ("f4", (48,))], lambda g, a, b: bc.mul_backward(g, a, b)[1],
                     lambda g, a, b: (g.double() * a.double()).sum(0)),
}


def _numpy_inputs(case):
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    out = []
    for dt, shape in CASES[case][0]:
        if dt == "?":
            out.append(rng.random(shape) < 0.5)
        elif dt == "i4":
            out.append(rng.integers(-1000, 1000, shape).astype(np.int32))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_same_answer_from_every_framework(case):
    _, call, ref = CASES[case]
    arrays = _numpy_inputs(case)
    tin = [torch.from_numpy(a).to(DEV) for a in arrays]
    tres = call(*tin)
    assert isinstance(tres, torch.Tensor) and tres.is_cuda
    R.assert_matches(tres, ref(*tin), case.split("-")[0])
    expected = tres.cpu().numpy()
    ran = ["torch"]
    try:
        cp = R.cupy_gpu()
        cres = call(*[cp.asarray(a) for a in arrays])
        assert isinstance(cres, cp.ndarray), type(cres)
        got = cp.asnumpy(cres)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), f"{case}: CuPy differs from torch"
        ran.append("cupy")
    except pytest.skip.Exception:
        pass
    try:
        jax, dev = R.jax_gpu()
        jin = [jax.device_put(a, dev) for a in arrays]
        jres = call(*jin)
        assert isinstance(jres, jax.Array), type(jres)
        assert next(iter(jres.devices())) == dev
        got = np.asarray(jres)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), f"{case}: JAX differs from torch"
        ran.append("jax")
    except pytest.skip.Exception:
        pass
    if len(ran) == 1:
        pytest.skip("neither CuPy nor JAX with a GPU is installed")


def test_jax_bfloat16_and_scalars():
    jax, dev = R.jax_gpu()
    import jax.numpy as jnp

    x = torch.randn(33, 64, generator=R.gen("jax-bf16"), device=DEV).to(torch.bfloat16)
    jx = jax.device_put(jnp.asarray(x.float().cpu().numpy(), dtype=jnp.bfloat16), dev)
    for call in (lambda t: bc.silu(t), lambda t: bc.add(t, 1.5), lambda t: bc.maximum(0.0, t)):
        jr, tr = call(jx), call(x)
        assert isinstance(jr, jax.Array) and jr.dtype == jnp.bfloat16
        assert np.array_equal(np.asarray(jr.astype(jnp.float32)), tr.float().cpu().numpy())


def test_jax_out_is_refused():
    """JAX arrays are immutable: writing into one must be refused, not done behind JAX's back."""
    jax, dev = R.jax_gpu()
    x = jax.device_put(np.ones(64, np.float32), dev)
    y = jax.device_put(np.zeros(64, np.float32), dev)
    with pytest.raises(errors.InvalidArgument):
        bc.exp(x, out=y)
    assert (np.asarray(y) == 0).all()


def test_zero_copy_torch():
    x = R.make((33, 65), torch.float32)
    out = R.poison((33, 65), torch.float32)
    ptr = out.data_ptr()
    assert bc.exp(x, out=out) is out and out.data_ptr() == ptr
    R.assert_matches(out, torch.exp(x.double()), "exp")
    ref = -x.double()
    bc.neg(x, out=x)  # the input's own memory, written through the view baracuda imported
    R.assert_matches(x, ref, "neg")


def test_zero_copy_cupy():
    cp = R.cupy_gpu()
    x = cp.linspace(-2, 2, 4097, dtype=cp.float32)
    out = cp.full(4097, cp.nan, dtype=cp.float32)
    ptr = out.data.ptr
    assert bc.exp(x, out=out) is out and out.data.ptr == ptr
    cp.testing.assert_allclose(out, cp.exp(x), rtol=2e-6)
    bc.neg(x, out=x)
    cp.testing.assert_allclose(x, -cp.linspace(-2, 2, 4097, dtype=cp.float32), rtol=0)
    t = bc.lt(x, 0.0)
    assert isinstance(t, cp.ndarray) and t.dtype == cp.bool_


def test_cpu_and_numpy_inputs_are_refused():
    _raises(errors.InvalidArgument, lambda: bc.exp(np.ones(4, np.float32)), "numpy")
    _raises(errors.InvalidArgument, lambda: bc.exp(torch.ones(4)), "CUDA")
    plan = _plan("exp", [S((4,), bc.float32)], S((4,), bc.float32))
    _raises(errors.InvalidArgument, lambda: plan.run(np.empty(4, np.float32), torch.ones(4, device=DEV)), "out", "CUDA")


def test_dtype_conversion():
    for name in ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
                 "float8_e4m3fn", "float8_e5m2"] + (["uint32"] if R.UINT32 is not None else []):
        assert bc.dtype(getattr(torch, name)) == getattr(bc.DType, name)
        assert bc.dtype(name) == getattr(bc.DType, name)
    assert bc.dtype(np.float16) == bc.float16 and bc.dtype(np.dtype("int64")) == bc.int64
    try:
        import jax.numpy as jnp

        assert bc.dtype(jnp.bfloat16) == bc.bfloat16 and bc.dtype(jnp.float8_e4m3fn) == bc.float8_e4m3fn
    except ImportError:
        pass
    with pytest.raises(errors.InvalidDType):
        bc.dtype("float128")


# ---- streams ---------------------------------------------------------------------------------------

def _snapshot(t):
    """A copy of t taken on a fresh stream that waits for nothing else."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = t.clone()
    s.synchronize()
    return c


@pytest.mark.parametrize("kind", ["int", "torch", "cupy"])
def test_explicit_stream_is_used(kind):
    """The op is queued behind work already on the stream it is given (and not on another one)."""
    if kind == "cupy":
        cp = R.cupy_gpu()
        handle = cp.cuda.Stream(non_blocking=True)
        ts = torch.cuda.ExternalStream(handle.ptr)
    else:
        ts = torch.cuda.Stream()
        handle = ts.cuda_stream if kind == "int" else ts
    x, y = R.make((1 << 20,), torch.float32), R.poison((1 << 20,), torch.float32)
    torch.cuda.synchronize()
    with torch.cuda.stream(ts):
        torch.cuda._sleep(SLEEP)
    bc.exp(x, out=y, stream=handle)
    torch.cuda.default_stream().synchronize()  # had it gone to the default stream, it would be done now
    early = _snapshot(y)
    busy = not ts.query()
    ts.synchronize()
    if not busy:
        pytest.skip("the sleep kernel finished too early to tell")
    assert early.isnan().all(), "the op did not wait for the work queued on its stream"
    R.assert_matches(y, torch.exp(x.double()), "exp")


@pytest.mark.parametrize("api", ["functional", "allocating", "plan"])
def test_torch_current_stream_is_honoured(api):
    """Inside `with torch.cuda.stream(s)` the op runs on s: it completes while the default stream is busy."""
    x = R.make((1 << 20,), torch.float32)
    y = R.poison((1 << 20,), torch.float32)
    plan = _plan("exp", [S((1 << 20,), bc.float32)], S((1 << 20,), bc.float32))
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP)  # on the default stream
    with torch.cuda.stream(s):
        if api == "functional":
            bc.exp(x, out=y)
        elif api == "plan":
            plan.run(y, x)
        else:
            y = bc.exp(x)
        host = y.cpu()  # on s: waits for s only
    busy = not torch.cuda.default_stream().query()
    torch.cuda.synchronize()
    if not busy:
        pytest.skip("the sleep kernel finished too early to tell")
    R.assert_matches(host.to(DEV), torch.exp(x.double()), "exp")


def test_cupy_current_stream_is_honoured():
    cp = R.cupy_gpu()
    x = cp.linspace(-2, 2, 1 << 20, dtype=cp.float32)
    y = cp.full(1 << 20, cp.nan, dtype=cp.float32)
    cs = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    torch.cuda._sleep(SLEEP)  # the legacy default stream, shared with CuPy
    with cs:
        bc.exp(x, out=y)
        host = y.get(stream=cs)
        cs.synchronize()
    busy = not torch.cuda.default_stream().query()
    torch.cuda.synchronize()
    if not busy:
        pytest.skip("the sleep kernel finished too early to tell")
    np.testing.assert_allclose(host, np.exp(cp.asnumpy(x)), rtol=2e-6)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensor_on_another_gpu():
    x = torch.randn(4097, device="cuda:1", generator=torch.Generator("cuda:1").manual_seed(1))
    y = bc.exp(x)
    assert y.device == x.device and torch.cuda.current_device() == 0
    R.assert_matches(y, torch.exp(x.double()), "exp")
    out = torch.full_like(x, math.nan)
    bc.add(x, x, out=out, stream=torch.cuda.current_stream(1))
    torch.cuda.synchronize(1)
    R.assert_matches(out, 2 * x.double(), "add")
    with torch.cuda.device(1), torch.cuda.stream(torch.cuda.Stream(1)):
        R.assert_matches(bc.silu(x), torch.nn.functional.silu(x.double()), "silu")
    torch.cuda.synchronize(1)
    _raises(errors.InvalidArgument, lambda: bc.add(torch.randn(4097, device="cuda:0"), x), "cuda:")
    try:
        cp = R.cupy_gpu()
        with cp.cuda.Device(1):
            cx = cp.linspace(-1, 1, 100, dtype=cp.float32)
        cy = bc.exp(cx)
        assert cy.device.id == 1
        cp.testing.assert_allclose(cy, cp.exp(cx), rtol=2e-6)
    except pytest.skip.Exception:
        pass


def test_negative_strides_cupy():
    cp = R.cupy_gpu()
    x = cp.linspace(-3, 3, 4097, dtype=cp.float32)
    xr = x[::-1]
    try:
        xr.__dlpack__()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"cupy cannot export negative strides through DLPack: {e}")
    y = bc.exp(xr)
    assert isinstance(y, cp.ndarray)
    cp.testing.assert_allclose(y, cp.exp(xr), rtol=2e-6)
    out = cp.full(4097, cp.nan, dtype=cp.float32)[::-1]
    bc.mul(xr, x, out=out)
    cp.testing.assert_allclose(out, xr * x, rtol=1e-6)
    # 2-D: rows reversed, every other column.
    m = cp.random.standard_normal((33, 130), dtype=cp.float32)
    mv = m[::-1, ::2]
    cp.testing.assert_allclose(bc.exp(mv), cp.exp(mv), rtol=2e-6)


class _Foreign:
    """A producer baracuda does not know, handing on another array's DLPack capsule."""

    def __init__(self, a):
        self.a = a
        self.shape, self.dtype = a.shape, a.dtype

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_broken_strides_from_unknown_producers_are_refused():
    # CuPy before cupy/cupy#10228 exports a negative stride as a huge positive one; from CuPy
    # itself the import re-reads CuPy's byte strides, from any other producer such a view is
    # refused by name. A faithful export is simply used.
    cp = R.cupy_gpu()
    x = cp.linspace(-3, 3, 4097, dtype=cp.float32)
    out = cp.full(4097, cp.nan, dtype=cp.float32)
    try:
        bc.exp(_Foreign(x[::-1]), out=out)
    except errors.InvalidArgument as e:
        assert "stride" in str(e) and "addresses no real memory" in str(e), str(e)
        assert bool(cp.isnan(out).all())  # nothing ran
        return
    cp.testing.assert_allclose(out, cp.exp(x[::-1]), rtol=2e-6)

# ---- the plan API -------------------------------------------------------------------------------

def test_plan_select_once_run_many():
    f32, bf16 = bc.float32, bc.bfloat16
    plan = _plan("silu", [S((64, 48), bf16)], S((64, 48), bf16))
    assert plan.sku.op == "silu" and plan.sku.layout == "contiguous" and plan.sku.name.startswith("ew.")
    assert list(plan.sku.dtypes) == [bf16, bf16] and plan.sku.precision.compute_dtype == f32
    assert plan.sku.precision.deterministic and plan.sku.precision.bit_stable and plan.workspace_bytes() == 0
    for i in range(3):
        x = R.make((64, 48), torch.bfloat16, "act", R.gen(f"plan/{i}"))
        y = R.poison((64, 48), torch.bfloat16)
        assert plan.run(y, x) is None
        R.assert_matches(y, torch.nn.functional.silu(x.double()), "silu")
    xt = R.make((48, 64), torch.float32).t()
    pt = _plan("exp", [S((64, 48), f32, strides=[1, 64])], S((64, 48), f32))
    assert pt.sku.layout in ("strided", "transposed_tiled") and pt.sku.name == f"ew.unary.{pt.sku.layout}"
    y = R.poison((64, 48), torch.float32)
    pt.run(y, xt, stream=torch.cuda.current_stream().cuda_stream)
    R.assert_matches(y, torch.exp(xt.double()), "exp")
    pb = _plan("add", [S((64, 48), f32), S((48,), f32)], S((64, 48), f32))
    assert pb.sku.layout in ("inner_contiguous", "strided") and pb.sku.name == f"ew.binary.{pb.sku.layout}"
    ps = _plan("add", [S((64, 48), f32), S((), f32)], S((64, 48), f32))
    assert ps.sku.layout == "contiguous"
    # size-1 dims: their stride carries no meaning
    x1 = torch.randn(7, 64, device=DEV).as_strided((1, 64), (7, 1))
    p1 = _plan("neg", [S((1, 64), f32)], S((1, 64), f32))
    y1 = R.poison((1, 64), torch.float32)
    p1.run(y1, x1)
    assert torch.equal(y1, -x1)


def test_plan_run_refusals():
    f32 = bc.float32
    plan = _plan("add", [S((32, 64), f32), S((32, 64), f32)], S((32, 64), f32))
    g = R.gen("refusals")
    x, y, out = R.make((32, 64), torch.float32, g=g), R.make((32, 64), torch.float32, g=g), R.poison((32, 64),
                                                                                                   torch.float32)
    base = R.make((32 * 64 + 1,), torch.float32, g=g)
    IA, ID = errors.InvalidArgument, errors.InvalidDType
    cases = [
        (IA, lambda: plan.run(out, R.make((32, 63), torch.float32), y), ["a", "shape"]),
        (IA, lambda: plan.run(out, x, R.make((33, 64), torch.float32)), ["b", "shape"]),
        (IA, lambda: plan.run(R.poison((64, 32), torch.float32), x, y), ["out", "shape"]),
        (ID, lambda: plan.run(out, x.half(), y), ["a", "float16"]),
        (ID, lambda: plan.run(R.poison((32, 64), torch.float64), x, y), ["out", "float64"]),
        (IA, lambda: plan.run(out, R.make((64, 32), torch.float32).t(), y), ["a", "strides"]),
        (IA, lambda: plan.run(out, x, y.cpu()), ["b: expected a CUDA tensor"]),
        (IA, lambda: plan.run(out.cpu(), x, y), ["out", "CUDA"]),
        (IA, lambda: plan.run(base[1:].view(32, 64), base[:-1].view(32, 64), y), ["overlaps", "a"]),
        (IA, lambda: plan.run(out, x), ["input"]),
        (IA, lambda: plan.run(out, x, y, stream="nope"), ["stream"]),
    ]
    for exc, fn, needles in cases:
        _raises(exc, fn, *needles)
    assert issubclass(ID, TypeError) and issubclass(ID, IA) and issubclass(IA, ValueError)
    assert out.isnan().all()  # nothing ran
    plan.run(x, x, y)  # in place (same view) is fine
    plan.run(out, x, x)


def test_plan_workspace():
    """A bias-style gradient with few outputs splits its rows: partial sums live in the workspace."""
    f32 = bc.float32
    rows, cols = 8192, 48
    desc = ([S((rows, cols), f32), S((rows, cols), f32), S((cols,), f32)], S((cols,), f32), {"wrt": 1})
    plan = _plan("add_backward", *desc)
    ws = plan.workspace_bytes()
    assert ws >= 2 * cols * 4 and plan.sku.layout == "reduce_columns"
    g = R.gen("workspace")
    go, a = R.make((rows, cols), torch.float32, g=g), R.make((rows, cols), torch.float32, g=g)
    b = R.make((cols,), torch.float32, g=g)
    gb = R.poison((cols,), torch.float32)
    _raises(errors.InvalidArgument, lambda: plan.run(gb, go, a, b), "workspace")
    _raises(errors.InvalidArgument, lambda: plan.run(gb, go, a, b, workspace=torch.empty(ws - 256, dtype=torch.uint8,
                                                                                         device=DEV)), "workspace")
    big = torch.empty(ws + 4096, dtype=torch.uint8, device=DEV)
    _raises(errors.InvalidArgument, lambda: plan.run(big[:192].view(torch.float32), go, a, b, workspace=big),
            "workspace", "overlaps")
    assert gb.isnan().all()
    plan.run(gb, go, a, b, workspace=torch.empty(ws, dtype=torch.uint8, device=DEV))
    R.assert_matches(gb, go.double().sum(0), "add_backward", rtol=1e-5, atol=1e-4)
    # A workspace limit of 0 gives one split and no workspace: same answer, bit for bit.
    small = _plan("add_backward", *desc, pref=bc.PlanPreference(workspace_limit=0))
    assert small.workspace_bytes() == 0
    gb2 = R.poison((cols,), torch.float32)
    small.run(gb2, go, a, b)
    R.assert_matches(gb2, go.double().sum(0), "add_backward", rtol=1e-5, atol=1e-4)
    _raises(errors.Unsupported, lambda: _plan("exp", [S((4,), f32)], S((4,), f32),
                                              pref=bc.PlanPreference(forbid=[bc.Backend.bespoke])))


def test_functional_plan_cache_is_reused():
    x = R.make((33, 65), torch.float32)
    bc.exp(x)
    n = bc._C.elementwise_cache_size()
    for _ in range(5):
        bc.exp(R.make((33, 65), torch.float32))
    assert bc._C.elementwise_cache_size() == n
    R.check_op("exp", R.make((65, 33), torch.float32).t())  # other strides: another plan, right answer


def test_functional_errors():
    x = R.make((8, 16), torch.float32)
    _raises(errors.InvalidDType, lambda: bc.add(x, x.half()), "float16")
    _raises(errors.InvalidDType, lambda: bc.sin(x.int()), "int32")
    _raises(errors.InvalidArgument, lambda: bc.add(x, R.make((3, 16), torch.float32)), "broadcast")
    with pytest.raises(TypeError, match="foo"):  # real signatures: Python names the stray / missing argument
        bc.exp(x, foo=1.0)
    with pytest.raises(TypeError, match="'b'"):
        bc.add(x)
    _raises(errors.InvalidArgument, lambda: bc.exp(x.cpu()), "CUDA")
    _raises(errors.InvalidArgument, lambda: bc.exp(x, out=R.poison((16, 8), torch.float32)), "out")
    _raises(errors.InvalidDType, lambda: bc.where(x > 0, x, x.double()))
    _raises(errors.InvalidDType, lambda: bc.where(x, x, x), "cond")


# ---- CUDA graphs --------------------------------------------------------------------------------

def _capture(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm up off the default stream, as torch recommends
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def test_cuda_graph_capture_and_replay():
    f32 = bc.float32
    x, y = R.make((4096,), torch.float32), R.poison((4096,), torch.float32)
    plan = _plan("exp", [S((4096,), f32)], S((4096,), f32))
    a, b = R.make((256, 64), torch.bfloat16), R.make((64,), torch.bfloat16)
    z = R.poison((256, 64), torch.bfloat16)
    graph = _capture(lambda: (plan.run(y, x, stream=torch.cuda.current_stream()), bc.add(a, b, out=z)))
    for i in range(3):
        x.copy_(R.make((4096,), torch.float32, g=R.gen(f"graph/{i}")))
        a.copy_(R.make((256, 64), torch.bfloat16, g=R.gen(f"graph/a{i}")))
        y.fill_(math.nan)
        z.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        R.assert_matches(y, torch.exp(x.double()), "exp")
        R.assert_matches(z, a.double() + b.double(), "add")


def test_cuda_graph_with_workspace():
    f32 = bc.float32
    plan = _plan("mul_backward", [S((512, 96), f32), S((512, 96), f32), S((96,), f32)], S((96,), f32), {"wrt": 1})
    ws = torch.empty(plan.workspace_bytes(), dtype=torch.uint8, device=DEV)
    go, a, b = R.make((512, 96), torch.float32), R.make((512, 96), torch.float32), R.make((96,), torch.float32)
    gb = R.poison((96,), torch.float32)
    graph = _capture(lambda: plan.run(gb, go, a, b, workspace=ws, stream=torch.cuda.current_stream()))
    for i in range(2):
        go.copy_(R.make((512, 96), torch.float32, g=R.gen(f"graphws/{i}")))
        gb.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        R.assert_matches(gb, (go.double() * a.double()).sum(0), "mul_backward", rtol=1e-5, atol=1e-4)


def test_functional_workspace_is_kept_per_stream():
    """The functional ops keep one scratch buffer per (device, stream) (here mul_backward's, which
    sums the gradient of a broadcast operand): a warm call allocates nothing beyond its outputs,
    another stream gets its own buffer, results stay right on both, and clear_workspaces() hands
    the buffers back."""
    go, a, b = R.make((512, 96), torch.float32), R.make((512, 96), torch.float32), R.make((96,), torch.float32)
    ref = (go.double() * a.double()).sum(0)

    def grad_b():
        return bc.mul_backward(go, a, b)[1]

    bc.clear_workspaces()
    R.assert_matches(grad_b(), ref, "mul_backward", rtol=1e-5, atol=1e-4)
    assert bc.clear_workspaces() >= 1, "mul_backward kept no workspace"
    gb = grad_b()  # allocates the buffer again
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(5):
        gb = grad_b()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before, "a warm call allocated more than its outputs"
    R.assert_matches(gb, ref, "mul_backward", rtol=1e-5, atol=1e-4)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gb2 = grad_b()
    torch.cuda.current_stream().wait_stream(s)
    R.assert_matches(gb2, ref, "mul_backward on a second stream", rtol=1e-5, atol=1e-4)
    assert bc.clear_workspaces() >= 2, "the second stream shared the first stream's workspace"


def test_functional_ops_in_a_cuda_graph():
    """bc.linear and bc.rms_norm captured in a CUDA graph: under capture the workspace is allocated
    for the call (the graph's pool owns it), never taken from or put into the per-stream cache."""
    x, w, nw = R.make((64, 256), torch.bfloat16), R.make((128, 256), torch.bfloat16), R.make((128,), torch.bfloat16)
    box = {}
    graph = _capture(lambda: box.update(y=bc.rms_norm(bc.linear(x, w), nw)))
    for i in range(2):
        x.copy_(R.make((64, 256), torch.bfloat16, g=R.gen(f"graphfn/{i}")))
        box["y"].fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        h = x.double() @ w.double().T
        ref = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * nw.double()
        R.assert_matches(box["y"], ref, "rms_norm(linear) replayed", rtol=3e-2, atol=3e-2)
    y = bc.linear(x, w)  # eager again on the default stream, after the capture
    R.assert_matches(y, x.double() @ w.double().T, "linear after capture")


def test_torch_import_reads_views_and_parameters():
    """torch tensors are read through torch's DLPack exchange API where it has one: offsets,
    strides, Parameters and a lazy neg view come through right (the neg bit resolved)."""
    base = R.make((8, 70), torch.float32)
    v = base[1:7, 3:67]  # a byte offset and a row stride
    R.assert_matches(bc.exp(v), torch.exp(v.double()), "exp of a strided view")
    p = torch.nn.Parameter(R.make((64,), torch.float32), requires_grad=False)
    R.assert_matches(bc.mul(p, p), p.double() * p.double(), "mul of a Parameter")
    n = torch._neg_view(R.make((64,), torch.float32))
    R.assert_matches(bc.exp(n), torch.exp(n.double()), "exp of a neg view")


def test_cupy_bfloat16_output_comes_from_cupys_pool():
    """A bf16 / fp8 result for CuPy inputs is allocated from CuPy's memory pool (a CuPy array where
    this CuPy has the dtype, else a DLPack array over the pool's memory that torch / JAX read)."""
    cp = R.cupy_gpu()
    pool = cp.get_default_memory_pool()
    x = cp.asarray(np.linspace(-4, 4, 4096, dtype=np.float32).reshape(64, 64))
    before = pool.used_bytes()
    for dt, tdt in ((bc.bfloat16, torch.bfloat16), (bc.float8_e4m3fn, torch.float8_e4m3fn)):
        y = bc.cast(x, dt)
        assert pool.used_bytes() > before, "the output did not come from CuPy's pool"
        got = torch.from_dlpack(y)
        assert got.dtype == tdt and tuple(got.shape) == (64, 64)
        ref = torch.from_dlpack(x).to(tdt)
        assert torch.equal(got.view(torch.uint8) if tdt != torch.bfloat16 else got, ref.view(torch.uint8)
                           if tdt != torch.bfloat16 else ref)
        del y, got
