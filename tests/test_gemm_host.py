"""GEMM plan selection without a GPU: validation and messages, descriptors, the registry.

Everything here is decided at select() from the descriptor alone, so it runs in CI (no GPU);
cuBLASLt itself is loaded when a plan needs it (the nvidia-cublas wheel is a dependency).
"""
import pytest

bc = pytest.importorskip("baracuda")
errors = bc.errors
S = bc.TensorSpec


def desc(m=8, n=16, k=32, dt=None, out_dt=None, b_strides=None, **kw):
    dt = dt or bc.bfloat16
    return bc.GemmDescriptor(S((m, k), dt), S((k, n), dt, b_strides) if b_strides else S((k, n), dt),
                             S((m, n), out_dt or dt), **kw)


def test_descriptor_is_data():
    a, b = desc(), desc()
    assert a == b and hash(a) == hash(b)
    assert desc(epilogue="relu") != a
    r = repr(desc(epilogue="gelu_tanh", bias=bc.float32, aux=True))
    assert "gelu_tanh" in r and "bias=float32" in r and "aux" in r
    d = desc(bias=bc.bfloat16)
    assert d.bias == bc.bfloat16 and d.bias_grad is None and d.epilogue == "none"


@pytest.mark.parametrize("make,exc,match", [
    (lambda: bc.GemmDescriptor(S((8, 32), bc.bfloat16), S((31, 16), bc.bfloat16), S((8, 16), bc.bfloat16)),
     errors.InvalidArgument, "inner dimensions disagree"),
    (lambda: bc.GemmDescriptor(S((8, 32), bc.bfloat16), S((32, 16), bc.bfloat16), S((9, 16), bc.bfloat16)),
     errors.InvalidArgument, "a has 8 rows but out has 9"),
    (lambda: bc.GemmDescriptor(S((32,), bc.bfloat16), S((32, 16), bc.bfloat16), S((1, 16), bc.bfloat16)),
     errors.InvalidArgument, "a must have at least 2 dims"),
    (lambda: bc.GemmDescriptor(S((8, 32), bc.bfloat16), S((32, 16), bc.float16), S((8, 16), bc.bfloat16)),
     errors.InvalidDType, "a is bfloat16 but b is float16"),
    (lambda: desc(dt=bc.int32), errors.InvalidDType, "expected float16"),
    (lambda: desc(out_dt=bc.float16), errors.InvalidDType, "out is float16"),
    (lambda: desc(dt=bc.float8_e4m3fn, out_dt=bc.bfloat16), errors.InvalidArgument, "a_scale and b_scale"),
    (lambda: desc(dt=bc.float8_e5m2, out_dt=bc.bfloat16, a_scale="tensor", b_scale="tensor"),
     errors.InvalidDType, "e5m2 x e5m2"),
    (lambda: desc(dt=bc.int8, out_dt=bc.bfloat16, a_scale="tensor"), errors.InvalidArgument, "vector scales"),
    (lambda: desc(dt=bc.int8, out_dt=bc.int32, a_scale="vector"), errors.InvalidArgument, "takes no scales"),
    (lambda: desc(amax=True), errors.InvalidArgument, "amax is for fp8"),
    (lambda: desc(epilogue="relu", aux=True), errors.InvalidArgument, "relu's backward needs only out"),
    (lambda: desc(epilogue="dgelu_tanh"), errors.InvalidArgument, "reads the forward pre-activation"),
    (lambda: desc(epilogue="bias_grad"), errors.InvalidArgument, "writes bias_grad"),
    (lambda: desc(epilogue="swish"), errors.InvalidArgument, "epilogue 'swish' is unknown"),
    (lambda: desc(bias=bc.bfloat16, bias_grad=bc.bfloat16), errors.InvalidArgument, "exclude each other"),
    (lambda: desc(bias=bc.int8), errors.InvalidDType, "bias is int8"),
    (lambda: desc(a_scale="vector"), errors.InvalidArgument, "scales are for fp8 and int8"),
    (lambda: desc(a_scale="rows"), errors.InvalidArgument, "'none', 'tensor' or 'vector'"),
])
def test_refusals_name_the_argument(make, exc, match):
    with pytest.raises(exc, match=match):
        bc.GemmPlan.select(make())


def test_layout_refusals():
    # b with no unit stride in its last two dims
    d = bc.GemmDescriptor(S((8, 32), bc.float32), S((32, 16), bc.float32, (32, 2)), S((8, 16), bc.float32))
    with pytest.raises(errors.InvalidArgument, match="b has strides"):
        bc.GemmPlan.select(d)
    # out rows overlapping
    d = bc.GemmDescriptor(S((8, 32), bc.float32), S((32, 16), bc.float32), S((8, 16), bc.float32, (0, 1)))
    with pytest.raises(errors.InvalidArgument, match="out has overlapping elements"):
        bc.GemmPlan.select(d)
    # an epilogue with a column-major out
    d = bc.GemmDescriptor(S((8, 32), bc.float32), S((32, 16), bc.float32), S((8, 16), bc.float32, (1, 8)),
                          epilogue="relu")
    with pytest.raises(errors.Unsupported, match="row-major out"):
        bc.GemmPlan.select(d)
    # fp8 with a row-major b (not contiguous along K)
    d = desc(dt=bc.float8_e4m3fn, out_dt=bc.bfloat16, a_scale="tensor", b_scale="tensor")
    with pytest.raises(errors.InvalidArgument, match="contiguous along K"):
        bc.GemmPlan.select(d)


def test_empty_and_k_zero_need_no_library():
    e = bc.GemmPlan.select(desc(m=0))
    assert e.sku.name == "gemm.empty" and e.workspace_bytes() == 0
    z = bc.GemmPlan.select(desc(k=0, beta=2.0))
    assert z.sku.name == "gemm.k_zero"
    with pytest.raises(errors.Unsupported, match="K = 0"):
        bc.GemmPlan.select(desc(k=0, bias=bc.bfloat16))


def test_registry_lists_the_family():
    fams = {f["name"]: f for f in bc.families()}
    assert "gemm" in fams and fams["gemm"]["plan"] == "GemmPlan"
    backends = {op["backend"] for op in fams["gemm"]["ops"]}
    assert bc.Backend.cublaslt in backends and bc.Backend.bespoke in backends


def test_backend_info_says_where_cublaslt_is():
    info = bc.gemm_backend_info()
    assert set(info) == {"cublaslt_available", "cublaslt_path", "cublaslt_version", "error", "cublas_available",
                         "cublas_path", "cublas_error"}
    if info["cublaslt_available"]:
        # the major version of the CUDA the build targets (CUDA 12 builds load libcublasLt.so.12)
        cuda_major = bc.build_info()["cuda_runtime_version"] // 1000
        assert info["cublaslt_path"] and info["cublaslt_version"] // 10000 == cuda_major and not info["error"]
    else:
        assert "nvidia-cublas" in info["error"]
    if info["cublas_available"]:
        assert "libcublas.so" in info["cublas_path"] and not info["cublas_error"]
    else:
        assert "nvidia-cublas" in info["cublas_error"] and not info["cublas_path"]


def test_tf32_routes_to_cublas_where_lt_has_no_hopper_kernel():
    """tf32 (a bias and a forward activation as passes of ours): cuBLAS unless both operands are
    K-major in cuBLASLt's formulation (a and b column-major for a row-major out), where cuBLASLt's
    heuristic reaches Hopper's tf32 kernels; aux with beta != 0, prefer=[cublaslt] or forbidding cuBLAS
    keep it on cuBLASLt; IEEE f32 stays on cuBLASLt."""
    info = bc.gemm_backend_info()
    if not (info["cublaslt_available"] and info["cublas_available"]):
        pytest.skip("no cuBLAS / cuBLASLt libraries on this machine")
    f32 = bc.float32
    tf32 = bc.PlanPreference(allow_tf32=True)

    def plan(a_st=None, b_st=None, pref=tf32, **kw):
        return bc.GemmPlan.select(bc.GemmDescriptor(S((64, 128), f32, a_st), S((128, 32), f32, b_st),
                                                    S((64, 32), f32), **kw), pref)

    for a_st, b_st in ((None, None), (None, (1, 128)), ((1, 64), None)):
        p = plan(a_st, b_st)
        assert p.sku.backend == bc.Backend.cublas and p.sku.name == "gemm.cublas.tf32", (a_st, b_st)
        assert "tf32" in p.sku.precision.math and p.workspace_bytes() > 0
    assert plan((1, 64), (1, 128)).sku.backend == bc.Backend.cublaslt  # both K-major
    with_bias = plan(bias=f32)  # cuBLAS, then our bias pass
    assert with_bias.sku.backend == bc.Backend.cublas and with_bias.sku.name == "gemm.cublas.tf32+ew.bias"
    assert "bias" in with_bias.sku.precision.math and with_bias.sku.op == "bias"
    act = plan(bias=f32, epilogue="gelu_tanh", aux=True)  # cuBLAS into aux, our bias and activation passes
    assert act.sku.backend == bc.Backend.cublas and act.sku.name == "gemm.cublas.tf32+ew.bias+ew.gelu_tanh"
    assert plan(bias=f32, epilogue="gelu_tanh", aux=True, beta=1.0).sku.backend == bc.Backend.cublaslt
    assert plan(pref=bc.PlanPreference(allow_tf32=True, prefer=[bc.Backend.cublaslt])).sku.backend == \
        bc.Backend.cublaslt
    assert plan(pref=bc.PlanPreference(allow_tf32=True, forbid=[bc.Backend.cublas])).sku.backend == \
        bc.Backend.cublaslt
    assert plan(pref=bc.PlanPreference()).sku.backend == bc.Backend.cublaslt
    assert plan(pref=bc.PlanPreference(allow_tf32=True, workspace_limit=0)).workspace_bytes() == 0


# ---- layouts and epilogue combinations the kernels cannot honour are refused at select ------------

def test_overlapping_rows_never_reach_the_decode_kernel():
    # a stride-0 a (x[:1].expand(4, 64)) would be read past its one row by the M <= 16 kernel:
    # such a plan goes to cuBLASLt's layout checks, which refuse the leading dimension
    bf16 = bc.bfloat16
    bad = bc.GemmDescriptor(S((4, 64), bf16, (0, 1)), S((64, 32), bf16, (1, 64)), S((4, 32), bf16))
    with pytest.raises(errors.InvalidArgument, match="leading dimension of 0"):
        bc.GemmPlan.select(bad)
    ok = bc.GemmDescriptor(S((1, 64), bf16, (0, 1)), S((64, 32), bf16, (1, 64)), S((1, 32), bf16))
    assert "gemv_lowm" in bc.GemmPlan.select(ok).sku.name  # one row: its stride means nothing


def test_negative_strides_are_refused():
    f32 = bc.float32
    with pytest.raises(errors.Unsupported, match="out has a negative stride"):
        bc.GemmPlan.select(bc.GemmDescriptor(S((1, 8), f32), S((8, 8), f32), S((1, 8), f32, (8, -1))))
    with pytest.raises(errors.Unsupported, match="a has a negative stride"):
        bc.GemmPlan.select(bc.GemmDescriptor(S((4, 8), f32, (-8, 1)), S((8, 8), f32), S((4, 8), f32)))


def test_epilogue_combinations_that_would_compute_something_else():
    i8 = bc.int8
    colmajor = bc.GemmDescriptor(S((32, 64), i8), S((64, 16), i8, (1, 64)), S((32, 16), bc.float32, (1, 32)),
                                 a_scale="vector", b_scale="vector")
    with pytest.raises(errors.Unsupported, match="dequantizing epilogue takes a row-major out"):
        bc.GemmPlan.select(colmajor)
    for act in ("gelu", "silu"):
        with pytest.raises(errors.Unsupported, match="beta != 0"):
            bc.GemmPlan.select(desc(epilogue=act, aux=True, beta=1.0))
        assert bc.GemmPlan.select(desc(epilogue=act, aux=True))  # beta = 0 is fine
    with pytest.raises(errors.Unsupported, match="bias_grad epilogue with N = 0"):
        bc.GemmPlan.select(desc(n=0, epilogue="bias_grad", bias_grad=bc.bfloat16))


def test_group_sizes_that_overflow_are_refused():
    bf16 = bc.bfloat16
    d = lambda sizes: bc.GroupedGemmDescriptor(S((8, 64), bf16), S((4, 32, 64), bf16), S((8, 32), bf16),  # noqa: E731
                                               group_sizes=sizes)
    for sizes in ([2 ** 62] * 4, [2 ** 63 - 1, 2, 0, 0], [4, 4, 1, 0]):
        with pytest.raises(errors.InvalidArgument, match="add up to more than the T = 8 rows"):
            bc.GroupedGemmPlan.select(d(sizes))
    assert bc.GroupedGemmPlan.select(d([4, 4, 0, 0]))


def test_grouped_tiled_selection():
    """The prefill grouped kernels: by tuning, or by default by the rows per expert (16 for CUTLASS's
    sm90 kernel on an sm_90 device in a CUTLASS build, else 64 for our tiled one); halves only."""
    devs = bc.devices()
    sm90 = bc.features()["cutlass"] and bool(devs) and devs[0]["sm"] == 90
    prefill = "gemm.grouped_sm90." if sm90 else "gemm.grouped_tiled."
    spec = bc.TensorSpec
    d32 = bc.GroupedGemmDescriptor(spec((64, 256), bc.float32), spec((4, 128, 256), bc.float32),
                                   spec((64, 128), bc.float32), offsets_dtype=bc.int32)
    with pytest.raises(errors.Unsupported, match="tiled grouped kernel takes bfloat16"):
        bc.GroupedGemmPlan.select(d32, bc.PlanPreference(tuning="kernel=tiled"))
    with pytest.raises(errors.InvalidArgument, match="expected gemv, tiled or sm90"):
        bc.GroupedGemmPlan.select(d32, bc.PlanPreference(tuning="kernel=cutlass"))
    dbf = bc.GroupedGemmDescriptor(spec((64, 256), bc.bfloat16), spec((4, 128, 256), bc.bfloat16),
                                   spec((64, 128), bc.bfloat16), offsets_dtype=bc.int64)
    assert bc.GroupedGemmPlan.select(dbf, bc.PlanPreference(tuning="kernel=tiled")).sku.name == \
        "gemm.grouped_tiled.m128n128k32"
    if not sm90:
        with pytest.raises(errors.Unsupported, match="sm90 grouped kernel"):
            bc.GroupedGemmPlan.select(dbf, bc.PlanPreference(tuning="kernel=sm90"))
    with pytest.raises(errors.Unsupported, match="sm90 grouped kernel"):  # bias: never the sm90 kernel
        bc.GroupedGemmPlan.select(bc.GroupedGemmDescriptor(spec((64, 256), bc.bfloat16), spec((4, 128, 256), bc.bfloat16),
                                                           spec((64, 128), bc.bfloat16), offsets_dtype=bc.int64,
                                                           bias=True), bc.PlanPreference(tuning="kernel=sm90"))
    assert bc.GroupedGemmPlan.select(dbf).sku.name.startswith(prefill if sm90 else "gemm.grouped_gemv")  # 16 per expert
    # 64 rows per expert on average: a prefill kernel by default (unless a bound says fewer)
    big = dict(offsets_dtype=bc.int64)
    dbig = bc.GroupedGemmDescriptor(spec((256, 256), bc.bfloat16), spec((4, 128, 256), bc.bfloat16),
                                    spec((256, 128), bc.bfloat16), **big)
    assert bc.GroupedGemmPlan.select(dbig).sku.name.startswith(prefill)
    hint = bc.GroupedGemmDescriptor(spec((256, 256), bc.bfloat16), spec((4, 128, 256), bc.bfloat16),
                                    spec((256, 128), bc.bfloat16), max_rows_per_group=8, **big)
    assert bc.GroupedGemmPlan.select(hint).sku.name.startswith("gemm.grouped_gemv")
    assert bc.GroupedGemmPlan.select(dbig, bc.PlanPreference(tuning="kernel=gemv")).sku.name.startswith(
        "gemm.grouped_gemv")
    f32 = bc.GroupedGemmDescriptor(spec((256, 256), bc.float32), spec((4, 128, 256), bc.float32),
                                   spec((256, 128), bc.float32), **big)
    assert bc.GroupedGemmPlan.select(f32).sku.name.startswith("gemm.grouped_gemv")
    dk = bc.GroupedGemmDescriptor(spec((64, 260), bc.bfloat16), spec((4, 128, 260), bc.bfloat16),
                                  spec((64, 128), bc.bfloat16), offsets_dtype=bc.int64)
    with pytest.raises(errors.Unsupported, match="multiples of 8"):
        bc.GroupedGemmPlan.select(dk, bc.PlanPreference(tuning="kernel=tiled"))
