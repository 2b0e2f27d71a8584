"""GPU correctness of the RoPE family against a float64 torch reference: both pair styles, partial
rotary, theta with every scaling rule, cos / sin caches
(f32 and the input's dtype, rows clamped), int32 / int64 positions, q and k with different head
counts in one launch, strided (BHSD) views, in place, unaligned rows (the scalar path), empty inputs;
the inverse (backward) and autograd through torch.ops.baracuda.rope, torch.compile. Outputs are
NaN-poisoned before every run."""
import math

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")

errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def gen(seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return g


def rnd(shape, dt, g):
    return torch.randn(shape, generator=g, device=DEV, dtype=torch.float64).to(dt)


def ref_angles(pos, inv_freq, af=1.0):
    """cos / sin [.., rd/2] in float64 from f32 angles (as the kernel and transformers compute them)."""
    ang = pos.to(torch.float32)[..., None] * torch.tensor(inv_freq, dtype=torch.float32, device=DEV)
    return ang.double().cos() * af, ang.double().sin() * af


def ref_rope(x, cos, sin, style, rd, inverse=False):
    """x [.., S, H, D]; cos / sin [.., S, rd/2] (float64). Returns float64."""
    x = x.double()
    c, s = cos[..., None, :], sin[..., None, :]
    if inverse:
        s = -s
    out = x.clone()
    if style == "neox":
        x1, x2 = x[..., : rd // 2], x[..., rd // 2: rd]
        out[..., : rd // 2] = x1 * c - x2 * s
        out[..., rd // 2: rd] = x2 * c + x1 * s
    else:
        x1, x2 = x[..., 0:rd:2], x[..., 1:rd:2]
        out[..., 0:rd:2] = x1 * c - x2 * s
        out[..., 1:rd:2] = x2 * c + x1 * s
    return out


def close(got, want, dt, what):
    atol, rtol = TOL[dt]
    torch.testing.assert_close(got.double(), want, atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")


def poisoned_like(x):
    return torch.full_like(x, float("nan"))


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("shape,rd", [((2, 37, 8, 128), None), ((3, 5, 4, 64), 32), ((1, 9, 3, 80), 48),
                                      ((50, 5, 96), 96), ((4, 6, 2, 20), 14)])
def test_theta_matches_reference(dt, style, shape, rd):
    g = gen(1)
    q = rnd(shape, dt, g)
    k = rnd(shape[:-2] + (max(1, shape[-2] // 2), shape[-1]), dt, g)
    rdim = rd or shape[-1]
    qo, ko = poisoned_like(q), poisoned_like(k)
    got = bc.rope(q, k, style=style, rotary_dim=rd, theta=500000.0, q_out=qo, k_out=ko)
    assert got[0] is qo and got[1] is ko
    inv, _ = bc.rope_frequencies(rdim, theta=500000.0)
    seq = shape[-3]
    pos = torch.arange(seq, device=DEV)
    cos, sin = ref_angles(pos, inv)
    close(qo, ref_rope(q, cos, sin, style, rdim), dt, "q")
    close(ko, ref_rope(k, cos, sin, style, rdim), dt, "k")
    if rdim < shape[-1]:
        assert torch.equal(qo[..., rdim:], q[..., rdim:]), "the pass-through part must be copied bitwise"


@pytest.mark.parametrize("pdt", [torch.int32, torch.int64])
@pytest.mark.parametrize("cache_dt", [torch.float32, torch.bfloat16])
def test_cache_and_positions(pdt, cache_dt):
    g = gen(2)
    dt = torch.bfloat16
    q = rnd((3, 11, 4, 64), dt, g)
    pos = torch.randint(0, 100, (3, 11), generator=g, device=DEV).to(pdt)
    pos[0, 0], pos[1, 1] = 120, -3  # outside the cache: clamped to its rows
    ang = torch.rand(100, 32, generator=g, device=DEV, dtype=torch.float64) * 6
    cos_t, sin_t = ang.cos().to(cache_dt), ang.sin().to(cache_dt)
    qo = bc.rope(q, cos=cos_t, sin=sin_t, positions=pos)
    idx = pos.long().clamp(0, 99)
    want = ref_rope(q, cos_t.double()[idx], sin_t.double()[idx], "neox", 64)
    close(qo, want, dt, "q")


@pytest.mark.parametrize("scaling", [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 16, "beta_slow": 2,
     "attention_factor": 1.3},
])
def test_scaling_rules(scaling):
    """The kernel under each scaling rule (the frequencies against transformers' are a host test)."""
    inv, af = bc.rope_frequencies(128, theta=500000.0, scaling=scaling)
    g = gen(3)
    q = rnd((2, 300, 8, 128), torch.float32, g)
    pos = torch.randint(0, 30000, (2, 300), generator=g, device=DEV)
    qo = bc.rope(q, positions=pos, theta=500000.0, scaling=scaling)
    cos, sin = ref_angles(pos, inv, af)
    close(qo, ref_rope(q, cos, sin, "neox", 128), torch.float32, "q")


def test_strided_views_and_in_place():
    g = gen(4)
    dt = torch.float16
    qh = rnd((2, 8, 33, 64), dt, g)  # [B, H, S, D] storage, used as a BSHD view
    q = qh.transpose(1, 2)
    k = rnd((2, 33, 2, 64), dt, g)
    inv, _ = bc.rope_frequencies(64)
    cos, sin = ref_angles(torch.arange(33, device=DEV), inv)
    want_q, want_k = ref_rope(q, cos, sin, "gptj", 64), ref_rope(k, cos, sin, "gptj", 64)
    q2, k2 = bc.rope(q, k, style="gptj", inplace=True)
    assert q2 is q and k2 is k
    close(q, want_q, dt, "q in place")
    close(k, want_k, dt, "k in place")
    # An odd offset into storage: rows not 8-byte aligned, the scalar path.
    base = rnd((1 + 5 * 3 * 64,), dt, g)
    x = base[1:].view(5, 3, 64)
    xo = bc.rope(x)
    cos, sin = ref_angles(torch.arange(5, device=DEV), inv)
    close(xo, ref_rope(x, cos, sin, "neox", 64), dt, "unaligned")


def test_in_place_on_fused_qkv_slices():
    # q, k, v as column slices of one projection output: byte ranges interleave, elements do not
    g = gen(14)
    dt = torch.bfloat16
    qkv = rnd((37, 6 + 2 * 2, 64), dt, g)
    q, k, v = qkv[:, :6], qkv[:, 6:8], qkv[:, 8:]
    v_before = v.clone()
    inv, _ = bc.rope_frequencies(64)
    pos = torch.randint(0, 100, (37,), device=DEV, generator=g)
    cos, sin = ref_angles(pos, inv)
    want_q, want_k = ref_rope(q, cos, sin, "neox", 64), ref_rope(k, cos, sin, "neox", 64)
    bc.rope(q, k, positions=pos, inplace=True)
    close(q, want_q, dt, "q slice")
    close(k, want_k, dt, "k slice")
    assert torch.equal(v, v_before)
    # an output that really shares elements with an input is still refused
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        bc.rope(q, k, positions=pos, q_out=qkv[:, 1:7], k_out=torch.empty_like(k))


def test_inverse_undoes_and_empty():
    g = gen(5)
    q = rnd((4, 17, 6, 128), torch.float32, g)
    pos = torch.randint(0, 4096, (4, 17), generator=g, device=DEV)
    back = bc.rope_backward(bc.rope(q, positions=pos), positions=pos)
    torch.testing.assert_close(back, q, atol=1e-5, rtol=1e-5)
    e = torch.empty(0, 4, 64, device=DEV, dtype=torch.bfloat16)
    assert bc.rope(e).shape == e.shape


def test_errors_name_the_argument():
    q = torch.zeros(2, 4, 64, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(errors.InvalidArgument, match="rotary_dim is 7"):
        bc.rope(q, rotary_dim=7)
    with pytest.raises(errors.InvalidArgument, match="style is 'rot'"):
        bc.rope(q, style="rot")
    with pytest.raises(errors.InvalidDType, match="q is int32"):
        bc.rope(q.int())
    with pytest.raises(errors.InvalidArgument, match="cos and sin go together"):
        bc.rope(q, cos=torch.zeros(4, 32, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="positions has shape"):
        bc.rope(q, positions=torch.zeros(3, dtype=torch.int64, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="cos has shape"):
        bc.rope(q, cos=torch.zeros(4, 16, device=DEV), sin=torch.zeros(4, 16, device=DEV))
    with pytest.raises(errors.Unsupported, match="rope_type 'dynamic'"):
        bc.rope(q, scaling={"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(errors.Unsupported, match="mscale"):
        bc.rope(q, scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 10, "mscale": 1})


@pytest.mark.parametrize("with_k", [True, False])
def test_autograd_and_compile(with_k):
    import baracuda.torch as bt
    g = gen(6)
    q = rnd((2, 9, 4, 64), torch.float32, g).requires_grad_()
    k = rnd((2, 9, 2, 64), torch.float32, g).requires_grad_() if with_k else None
    pos = torch.randint(0, 500, (2, 9), generator=g, device=DEV)
    out = bc.rope(q, k, positions=pos, rotary_dim=48)  # routed: q requires grad
    qo = out[0] if with_k else out
    assert qo.grad_fn is not None
    gq = torch.randn_like(qo)
    loss = (qo * gq).sum() + ((out[1] * 2).sum() if with_k else 0)
    loss.backward()
    inv, _ = bc.rope_frequencies(48)
    cos, sin = ref_angles(pos, inv)
    qd = q.detach().double().requires_grad_()
    ref = ref_rope(qd, cos, sin, "neox", 48)
    (ref * gq.double()).sum().backward()
    torch.testing.assert_close(q.grad.double(), qd.grad, atol=1e-5, rtol=1e-5)
    if with_k:
        kd = k.detach().double().requires_grad_()
        (ref_rope(kd, cos, sin, "neox", 48) * 2).sum().backward()
        torch.testing.assert_close(k.grad.double(), kd.grad, atol=1e-5, rtol=1e-5)
    with pytest.raises(errors.InvalidArgument, match="inplace"):
        bc.rope(q, inplace=True)
    f = torch.compile(lambda a, p: bt.rope(a, positions=p) * 2, fullgraph=True)
    torch.testing.assert_close(f(q.detach(), pos), bc.rope(q.detach(), positions=pos) * 2)


def test_rotary_embedding_module():
    import baracuda.torch as bt
    g = gen(9)
    q = rnd((2, 10, 4, 64), torch.bfloat16, g).requires_grad_()
    k = rnd((2, 10, 2, 64), torch.bfloat16, g)
    m = bt.RotaryEmbedding(theta=5e5, rotary_dim=32)
    a, b = m(q, k)
    assert a.grad_fn is not None
    torch.testing.assert_close(a, bc.rope(q.detach(), theta=5e5, rotary_dim=32), atol=0, rtol=0)
    torch.testing.assert_close(b, bc.rope(k, theta=5e5, rotary_dim=32), atol=0, rtol=0)



@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("style,rd", [("neox", 0), ("gptj", 32)])
@pytest.mark.parametrize("heads_first", [False, True])
def test_fused_cache_append_equals_rope_then_append(dt, style, rd, heads_first):
    """rope(q, k, k_cache=, v=, v_cache=, slot_mapping=): q and k rotated as rope does, the rotated k and
    v in the cache slots exactly as kv_cache_append writes them (padding slots untouched); from the
    views of one fused qkv projection."""
    g = gen(21)
    T, hq, hkv, d, pages, ps = 37, 8, 2, 64, 9, 16
    qkv = rnd((T, (hq + 2 * hkv) * d), dt, g).view(T, hq + 2 * hkv, d)
    pos = torch.randint(0, 500, (T,), generator=g, device=DEV)
    slots = torch.randperm(pages * ps, generator=g, device=DEV)[:T].int()
    slots[::7] = -1  # padding
    shape = (pages, hkv, ps, d) if heads_first else (pages, ps, hkv, d)

    def caches():
        kc, vc = (torch.full(shape, float("nan"), device=DEV, dtype=dt) for _ in range(2))
        return (kc.transpose(1, 2), vc.transpose(1, 2)) if heads_first else (kc, vc)

    ref_qkv = qkv.clone()
    rq, rk, rv = ref_qkv[:, :hq], ref_qkv[:, hq:hq + hkv], ref_qkv[:, hq + hkv:]
    bc.rope(rq, rk, positions=pos, style=style, rotary_dim=rd or None, theta=10000.0, inplace=True)
    rkc, rvc = caches()
    bc.kv_cache_append(rk, rv, rkc, rvc, slots)

    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    kc, vc = caches()
    bc.rope(q, k, positions=pos, style=style, rotary_dim=rd or None, inplace=True, k_cache=kc, v=v, v_cache=vc,
            slot_mapping=slots)
    assert torch.equal(qkv, ref_qkv), "q and k rotated in place as rope does, v untouched"
    assert torch.equal(kc.nan_to_num(7.0), rkc.nan_to_num(7.0)) and torch.equal(vc.nan_to_num(7.0), rvc.nan_to_num(7.0))
    assert torch.isnan(kc).sum() == torch.isnan(rkc).sum() == (pages * ps - (slots >= 0).sum()) * hkv * d


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "f16", "f32"])
@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("style,rd,scales", [("neox", 0, "per_head"), ("gptj", 32, "per_tensor"), ("neox", 48, None)])
@pytest.mark.parametrize("heads_first", [False, True])
def test_fused_append_into_fp8_caches(dt, fp8, style, rd, scales, heads_first):
    """An fp8 cache takes the rotated k and v quantized exactly as kv_cache_append quantizes them
    (fp8(x / scale) of the rotated k as stored in q's dtype, saturated), bit for bit, padding slots
    untouched; partial rotary's pass-through quantized too; scales per kv head, per tensor or none."""
    g = gen(22)
    T, hq, hkv, d, pages, ps = 37, 8, 2, 64, 9, 16
    qkv = (rnd((T, (hq + 2 * hkv) * d), dt, g) * 20).view(T, hq + 2 * hkv, d)  # some values saturate at scale 1
    pos = torch.randint(0, 500, (T,), generator=g, device=DEV)
    slots = torch.randperm(pages * ps, generator=g, device=DEV)[:T].int()
    slots[::7] = -1  # padding
    n = hkv if scales == "per_head" else 1
    ks = (torch.rand(n, generator=g, device=DEV) + 0.5) / 4 if scales else None
    vs = (torch.rand(n, generator=g, device=DEV) + 0.5) / 4 if scales else None
    shape = (pages, hkv, ps, d) if heads_first else (pages, ps, hkv, d)

    def caches():
        kc, vc = (torch.full(shape, 0x7f, device=DEV, dtype=torch.uint8).view(fp8) for _ in range(2))  # NaN
        return (kc.transpose(1, 2), vc.transpose(1, 2)) if heads_first else (kc, vc)

    ref_qkv = qkv.clone()
    rq, rk, rv = ref_qkv[:, :hq], ref_qkv[:, hq:hq + hkv], ref_qkv[:, hq + hkv:]
    bc.rope(rq, rk, positions=pos, style=style, rotary_dim=rd or None, inplace=True)
    rkc, rvc = caches()
    bc.kv_cache_append(rk, rv, rkc, rvc, slots, k_scale=ks, v_scale=vs)

    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    kc, vc = caches()
    bc.rope(q, k, positions=pos, style=style, rotary_dim=rd or None, inplace=True, k_cache=kc, v=v, v_cache=vc,
            slot_mapping=slots, k_scale=ks, v_scale=vs)
    assert torch.equal(qkv, ref_qkv), "q and k rotated in place as rope does, v untouched"
    as_bytes = lambda t: t.contiguous().view(torch.uint8)  # noqa: E731
    assert torch.equal(as_bytes(kc), as_bytes(rkc)) and torch.equal(as_bytes(vc), as_bytes(rvc))
    untouched = (pages * ps - (slots >= 0).sum()) * hkv * d
    assert (as_bytes(kc) == 0x7f).sum() == untouched and (as_bytes(vc) == 0x7f).sum() == untouched


def test_fused_append_scale_rules():
    q, k, v = torch.randn(5, 4, 64, device=DEV), torch.randn(5, 2, 64, device=DEV), torch.randn(5, 2, 64, device=DEV)
    kc8 = torch.zeros(2, 8, 2, 64, device=DEV, dtype=torch.float8_e4m3fn)
    kc = torch.zeros(2, 8, 2, 64, device=DEV)
    slots = torch.arange(5, device=DEV)
    one = torch.ones(1, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="k_scale / v_scale quantize into an fp8 cache"):
        bc.rope(q, k, inplace=True, k_cache=kc, v=v, v_cache=kc.clone(), slot_mapping=slots, k_scale=one, v_scale=one)
    with pytest.raises(errors.InvalidDType, match="v_cache is float32; expected k_cache's float8_e4m3fn"):
        bc.rope(q, k, inplace=True, k_cache=kc8, v=v, v_cache=kc.clone(), slot_mapping=slots)
    with pytest.raises(errors.InvalidArgument, match="v_scale without k_scale"):
        bc.rope(q, k, inplace=True, k_cache=kc8, v=v, v_cache=kc8.clone(), slot_mapping=slots, v_scale=one)
    with pytest.raises(errors.InvalidArgument, match="go with a cache append"):
        bc.rope(q, k, k_scale=one)
    with pytest.raises(errors.InvalidArgument, match="k_scale has shape"):
        bc.rope(q, k, inplace=True, k_cache=kc8, v=v, v_cache=kc8.clone(), slot_mapping=slots,
                k_scale=torch.ones(3, device=DEV), v_scale=torch.ones(3, device=DEV))
    with pytest.raises(errors.InvalidDType, match="k_scale is float16; expected float32"):
        bc.rope(q, k, inplace=True, k_cache=kc8, v=v, v_cache=kc8.clone(), slot_mapping=slots,
                k_scale=one.half(), v_scale=one)
    strided = torch.ones(2, 2, device=DEV)[:, 0]  # [kv_heads], stride 2
    with pytest.raises(errors.InvalidArgument, match="v_scale must be contiguous"):
        bc.rope(q, k, inplace=True, k_cache=kc8, v=v, v_cache=kc8.clone(), slot_mapping=slots,
                k_scale=torch.ones(2, device=DEV), v_scale=strided)


def test_fused_cache_append_under_compile():
    import baracuda.torch as bt
    q = torch.randn(5, 4, 64, device=DEV)
    k, v = torch.randn(5, 2, 64, device=DEV), torch.randn(5, 2, 64, device=DEV)
    kc, vc = torch.zeros(2, 8, 2, 64, device=DEV), torch.zeros(2, 8, 2, 64, device=DEV)
    slots = torch.arange(5, device=DEV)
    q2, k2 = q.clone(), k.clone()
    bc.rope(q2, k2, inplace=True)

    @torch.compile(fullgraph=True)
    def step(q, k, v, kc, vc, slots):
        bt.rope(q, k, inplace=True, k_cache=kc, v=v, v_cache=vc, slot_mapping=slots)

    with torch.no_grad():
        step(q, k, v, kc, vc, slots)
    assert torch.equal(q, q2) and torch.equal(k, k2)
    assert torch.equal(kc[0, :5], k2) and torch.equal(vc[0, :5], v)


@pytest.mark.parametrize("tuning", ["tpb=1", "tpb=5", "persistent=1", "tpb=16,persistent=1"])
@pytest.mark.parametrize("shape,rd,style", [((2, 300, 32, 128), None, "neox"), ((1, 1000, 4, 64), 32, "gptj"),
                                            ((3, 7, 8, 80), 48, "neox")])
def test_tuned_plans_give_the_same_bits(tuning, shape, rd, style):
    """The tuning knobs change the grid, not the arithmetic: every output bit equals the default plan's
    (partial rotary's pass-through included), for q and k, positions given."""
    g = gen(31)
    q = rnd(shape, torch.bfloat16, g)
    k = rnd(shape[:-2] + (2, shape[-1]), torch.bfloat16, g)
    pos = torch.randint(0, 8192, shape[:-2], generator=g, device=DEV)
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), tuple(t.stride()))  # noqa: E731
    desc = bc.RopeDescriptor(spec(q), spec(k), style=style, rotary_dim=rd or 0,
                             freqs=bc.RopeFrequencies(theta=500000.0), positions=True)
    outs = []
    for t in ("", tuning):
        plan = bc.RopePlan.select(desc, bc.PlanPreference(tuning=t))
        qo, ko = poisoned_like(q), poisoned_like(k)
        plan.run(q=q, k=k, q_out=qo, k_out=ko, positions=pos)
        outs.append((qo, ko))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("tuning", ["", "tpb=3", "tpb=16,persistent=1", "tpb=1,persistent=1"])
@pytest.mark.parametrize("pdt,sdt", [(torch.int64, torch.int64), (torch.int32, torch.int32), (torch.int32, torch.int64)])
def test_append_over_batches_and_groups(tuning, pdt, sdt):
    """The fused cache append over a [B, S] batch, positions and slots strided [B, S] views (read ahead
    of each token group), padding slots, on every grid the tuning knobs give (one group per block,
    several per block, a persistent grid): q and k against float64, each cache slot holding exactly the
    rotated k and v's bits, padding slots untouched."""
    g = gen(41)
    B, S, hq, hkv, d, pages, ps = 2, 37, 8, 2, 128, 12, 16
    qkv = rnd((B, S, hq + 2 * hkv, d), torch.bfloat16, g)
    q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
    pos = torch.randint(0, 4096, (B, 2 * S), generator=g, device=DEV).to(pdt)[:, ::2]
    slots = torch.randperm(pages * ps, generator=g, device=DEV)[:2 * B * S].view(B, 2 * S).to(sdt)[:, 1::2]
    slots[0, ::5] = -1  # padding
    kc, vc = (torch.full((pages, ps, hkv, d), float("nan"), device=DEV, dtype=torch.bfloat16) for _ in range(2))
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), tuple(t.stride()))  # noqa: E731
    desc = bc.RopeDescriptor(spec(q), spec(k), style="neox", freqs=bc.RopeFrequencies(theta=10000.0),
                             positions=True, positions_dtype=bc.dtype(pdt), k_cache=spec(kc), v=spec(v),
                             v_cache=spec(vc), slot_dtype=bc.dtype(sdt))
    plan = bc.RopePlan.select(desc, bc.PlanPreference(tuning=tuning))
    qo, ko = poisoned_like(q), poisoned_like(k)
    plan.run(q=q, k=k, q_out=qo, k_out=ko, positions=pos, v=v, k_cache=kc, v_cache=vc, slot_mapping=slots)
    inv, af = bc.rope_frequencies(d, theta=10000.0)
    cos, sin = ref_angles(pos.long(), inv, af)
    close(qo, ref_rope(q, cos, sin, "neox", d), torch.bfloat16, f"q ({tuning or 'default'})")
    close(ko, ref_rope(k, cos, sin, "neox", d), torch.bfloat16, f"k ({tuning or 'default'})")
    real = slots >= 0
    at = slots[real].long()
    assert torch.equal(kc.view(-1, hkv, d)[at], ko[real]), "k's cache rows: the rotated k, bit for bit"
    assert torch.equal(vc.view(-1, hkv, d)[at], v[real]), "v's cache rows: v's bits"
    assert torch.isnan(kc).sum() == torch.isnan(vc).sum() == (pages * ps - int(real.sum())) * hkv * d
