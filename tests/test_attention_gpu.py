"""GPU correctness of the attention family against a float64 torch reference: the flash and rowwise
kernels over dtypes and head dims, GQA, causal (both alignments) with Sq != Sk, sliding windows,
softcap, ALiBi, sinks, packed sequences with seqused_k, strided (BHSD) views, empty inputs; the
backward (rowwise, deterministic) against autograd in float64; the torch op (opcheck, autograd,
torch.compile) and the SDPA form against torch's. Outputs are NaN-poisoned before every run.
"""
import math

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")

F = torch.nn.functional
errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

# (atol, rtol) of out / gradients against float64.
TOL = {torch.float64: (1e-10, 1e-10), torch.float32: (2e-5, 2e-5), torch.float16: (4e-3, 4e-3),
       torch.bfloat16: (2.5e-2, 2.5e-2)}
GRAD_TOL = {torch.float64: (1e-9, 1e-9), torch.float32: (1e-4, 1e-4), torch.float16: (2e-2, 2e-2),
            torch.bfloat16: (8e-2, 5e-2)}
HAS_FLASH = bc.features().get("fa2", False)


def gen(seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return g


def rnd(shape, dt, g, scale=1.0):
    return (torch.randn(shape, generator=g, device=DEV, dtype=torch.float64) * scale).to(dt)


def spec(t):
    """t's TensorSpec with its own strides (views as they are, no copy)."""
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), tuple(t.stride()))


def ref_seq(q, k, v, *, scale, causal, top_left, window, softcap, slopes, sinks):
    """One sequence in float64: q [sq, Hq, D], k / v [sk, Hkv, D]. Returns out [sq, Hq, Dv], lse [Hq, sq]."""
    q, k, v = q.double(), k.double(), v.double()
    sq, hq, sk, hkv = q.shape[0], q.shape[1], k.shape[0], k.shape[1]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, k) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    off = 0 if top_left else sk - sq
    pos = torch.arange(sq, device=DEV)[:, None] + off
    j = torch.arange(sk, device=DEV)[None, :]
    if slopes is not None:
        s = s - slopes.double()[:, None, None] * (pos - j).abs()[None]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=DEV)
    wl, wr = window
    if causal:
        wr = 0
    if wl >= 0:
        vis &= j >= pos - wl
    if wr >= 0:
        vis &= j <= pos + wr
    s = s.masked_fill(~vis[None], float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double()[:, None, None].expand(hq, sq, 1)], dim=2)
    lse = torch.logsumexp(s, dim=2)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    if sinks is not None:
        p = p[..., :-1]
    out = torch.einsum("hij,jhd->ihd", p, v)
    return out, lse


def ref_attention(q, k, v, *, scale=None, causal=False, top_left=False, window=(-1, -1), softcap=0.0, slopes=None,
                  sinks=None, cu_q=None, cu_k=None, seqused_k=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    kw = dict(scale=scale, causal=causal, top_left=top_left, window=window, softcap=softcap, sinks=sinks)
    if cu_q is None:
        outs, lses = [], []
        for b in range(q.shape[0]):
            sk = k.shape[1] if seqused_k is None else int(seqused_k[b])
            sl = slopes if slopes is None or slopes.dim() == 1 else slopes[b]
            o, l = ref_seq(q[b], k[b, :sk], v[b, :sk], slopes=sl, **kw)
            outs.append(o)
            lses.append(l)
        return torch.stack(outs), torch.stack(lses)
    outs, lses = [], []
    for b in range(cu_q.shape[0] - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if seqused_k is not None:
            k1 = min(k1, k0 + int(seqused_k[b]))
        o, l = ref_seq(q[q0:q1], k[k0:k1], v[k0:k1], slopes=slopes, **kw)
        outs.append(o)
        lses.append(l)
    return torch.cat(outs), torch.cat(lses, dim=1)


def check_close(got, want, dt, what, tol=TOL):
    atol, rtol = tol[dt]
    assert not torch.isnan(got).any(), f"{what}: NaN (an unwritten or poisoned element)"
    torch.testing.assert_close(got.double(), want, atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")


def check_lse(got, want):
    fin = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got), fin)
    torch.testing.assert_close(got.double()[fin], want[fin], atol=2e-4, rtol=2e-4)


def run(q, k, v, kernel, **kw):
    dt = q.dtype
    out = torch.full(tuple(q.shape[:-1]) + (v.shape[-1],), float("nan"), device=DEV, dtype=dt)
    out, lse = bc.attention(q, k, v, kernel=kernel, return_lse=True, out=out, **kw)
    return out, lse


KERNELS = ["rowwise"] + (["flash"] if HAS_FLASH else [])


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_head_dims(kernel, dt, d, causal):
    g = gen(d + causal)
    B, Sq, Sk, Hq, Hkv = 2, 77, 130, 4, 2
    q, k, v = rnd((B, Sq, Hq, d), dt, g), rnd((B, Sk, Hkv, d), dt, g), rnd((B, Sk, Hkv, d), dt, g)
    out, lse = run(q, k, v, kernel, causal=causal)
    want, wlse = ref_attention(q, k, v, causal=causal)
    check_close(out, want, dt, f"{kernel} d={d}")
    check_lse(lse, wlse)


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("d,dv", [(32, 32), (40, 72), (256, 128), (8, 8)])
def test_forward_rowwise_float_dtypes(dt, d, dv):
    g = gen(d)
    q, k, v = rnd((3, 33, 6, d), dt, g), rnd((3, 50, 2, d), dt, g), rnd((3, 50, 2, dv), dt, g)
    out, lse = run(q, k, v, "auto", causal=True)
    want, wlse = ref_attention(q, k, v, causal=True)
    check_close(out, want, dt, "rowwise")
    check_lse(lse, wlse)
    assert "rowwise" in bc.AttentionPlan.select(bc.AttentionDescriptor(
        "attention", *(bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), ()) for t in (q, k, v, out)))).sku.name


RULES = [
    dict(causal=True, causal_alignment="top_left"),
    dict(window=(16, 0)),
    dict(window=(20, 7)),
    dict(window=(-1, 5), causal_alignment="top_left"),
    dict(softcap=2.0),
    dict(causal=True, softcap=5.0, scale=0.3),
    dict(alibi=True, causal=True),
    dict(sinks=True),
    dict(sinks=True, window=(8, 0)),
]


def _rule_inputs(rule, hq, g, dt, batch=1):
    """The call's kwargs and the reference's for `rule` (alibi=True: slopes [Hq]; "batch": [B, Hq])."""
    kw = {k: v for k, v in rule.items() if k not in ("alibi", "sinks")}
    ref = dict(causal=kw.get("causal", False), top_left=kw.get("causal_alignment") == "top_left",
               window=kw.get("window", (-1, -1)), softcap=kw.get("softcap", 0.0), scale=kw.get("scale"))
    if rule.get("alibi"):
        shape = (batch, hq) if rule["alibi"] == "batch" else (hq,)
        kw["alibi_slopes"] = ref["slopes"] = torch.rand(shape, generator=g, device=DEV) * 0.5
    if rule.get("sinks"):
        sd = torch.float64 if dt == torch.float64 else torch.float32
        kw["sinks"] = ref["sinks"] = (torch.randn(hq, generator=g, device=DEV) * 2).to(sd)
    return kw, ref


def check_rule(q, k, v, kernel, rule, g):
    """`kernel` under `rule` against the float64 reference (out and lse); returns the call's kwargs."""
    kw, ref = _rule_inputs(rule, q.shape[2], g, q.dtype, q.shape[0])
    out, lse = run(q, k, v, kernel, **kw)
    want, wlse = ref_attention(q, k, v, **ref)
    check_close(out, want, q.dtype, f"{kernel} {rule}")
    check_lse(lse, wlse)
    return kw


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("rule", RULES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
@pytest.mark.parametrize("sq,sk", [(70, 150), (150, 70), (1, 129)])
def test_score_rules(kernel, rule, sq, sk):
    dt = torch.bfloat16
    g = gen(sq * 7 + sk)
    q, k, v = rnd((2, sq, 4, 128), dt, g), rnd((2, sk, 1, 128), dt, g), rnd((2, sk, 1, 128), dt, g)
    check_rule(q, k, v, kernel, rule, g)


@pytest.mark.parametrize("kernel", KERNELS)
def test_varlen_and_seqused(kernel):
    dt = torch.float16
    g = gen(11)
    lq, lk = [5, 0, 130, 64], [9, 3, 200, 64]
    cu_q = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device=DEV)
    used = torch.tensor([9, 2, 150, 64], dtype=torch.int32, device=DEV)
    q, k, v = rnd((sum(lq), 8, 64), dt, g), rnd((sum(lk), 2, 64), dt, g), rnd((sum(lk), 2, 64), dt, g)
    for seqused in (None, used):
        out, lse = run(q, k, v, kernel, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lq),
                       max_seqlen_k=max(lk), seqused_k=seqused)
        want, wlse = ref_attention(q, k, v, causal=True, cu_q=cu_q, cu_k=cu_k, seqused_k=seqused)
        check_close(out, want, dt, f"{kernel} varlen")
        check_lse(lse, wlse)


@pytest.mark.parametrize("kernel", KERNELS + (["cudnn"] if bc.features().get("cudnn", False) else []))
def test_bad_offsets_stay_in_bounds(kernel):
    """Offsets past the tensors or decreasing are clamped on the device: no out-of-bounds access, and
    the well-formed sequences before them are still right."""
    dt = torch.float16
    g = gen(13)
    q, k, v = rnd((40, 4, 64), dt, g), rnd((50, 2, 64), dt, g), rnd((50, 2, 64), dt, g)
    # sequence 1: queries 10..39 over no key (12 -> -7); sequence 2: no query (past the tensor)
    cu_q = torch.tensor([0, 10, 100000, 5], dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0, 12, -7, 60], dtype=torch.int32, device=DEV)
    out, lse = run(q, k, v, kernel, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=64,
                   max_seqlen_k=64)
    torch.cuda.synchronize()
    good = torch.tensor([0, 10], dtype=torch.int32, device=DEV)
    gk = torch.tensor([0, 12], dtype=torch.int32, device=DEV)
    want, wlse = ref_attention(q[:10], k[:12], v[:12], causal=True, cu_q=good, cu_k=gk)
    check_close(out[:10], want, dt, f"{kernel} first sequence")
    check_lse(lse[:, :10], wlse)
    assert (out[10:] == 0).all() and (lse[:, 10:] == float("-inf")).all()
    gout = rnd(out.shape, dt, g)
    bc.attention_backward(gout, q, k, v, out.nan_to_num(), lse, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                          max_seqlen_q=64, max_seqlen_k=64, kernel=kernel)
    torch.cuda.synchronize()


@pytest.mark.parametrize("kernel", KERNELS)
def test_bhsd_views_and_zero_rows(kernel):
    dt = torch.bfloat16
    g = gen(5)
    # [B, H, S, D] tensors viewed as [B, S, H, D]: no copies, other strides.
    qh, kh, vh = rnd((2, 4, 90, 64), dt, g), rnd((2, 2, 90, 64), dt, g), rnd((2, 2, 90, 64), dt, g)
    q, k, v = qh.transpose(1, 2), kh.transpose(1, 2), vh.transpose(1, 2)
    out, _ = run(q, k, v, kernel, causal=True)
    want, _ = ref_attention(q, k, v, causal=True)
    check_close(out, want, dt, "bhsd")
    # a window that hides every key from some rows: out 0, lse -inf
    out, lse = run(q, k[:, :10], v[:, :10], kernel, window=(0, 0), causal_alignment="top_left")
    want, wlse = ref_attention(q, k[:, :10], v[:, :10], window=(0, 0), top_left=True)
    check_close(out, want, dt, "empty rows")
    check_lse(lse, wlse)


def test_empty_inputs():
    for shape_q, shape_k in (((0, 5, 2, 64), (0, 5, 2, 64)), ((2, 0, 2, 64), (2, 5, 2, 64)),
                             ((2, 3, 2, 64), (2, 0, 2, 64))):
        q = torch.randn(shape_q, device=DEV, dtype=torch.bfloat16)
        k = torch.randn(shape_k, device=DEV, dtype=torch.bfloat16)
        out, lse = bc.attention(q, k, k, return_lse=True)
        assert out.shape == shape_q[:3] + (64,)
        assert not out.isnan().any() and (out == 0).all()
        assert (lse == float("-inf")).all()


def test_flash_matches_rowwise_and_is_deterministic():
    if not HAS_FLASH:
        pytest.skip("no flash kernels in this build")
    g = gen(9)
    q, k, v = rnd((2, 300, 8, 128), torch.bfloat16, g), rnd((2, 300, 8, 128), torch.bfloat16, g), \
        rnd((2, 300, 8, 128), torch.bfloat16, g)
    a = bc.attention(q, k, v, causal=True, kernel="flash")
    b = bc.attention(q, k, v, causal=True, kernel="flash")
    assert torch.equal(a, b)
    c = bc.attention(q, k, v, causal=True, kernel="rowwise")
    torch.testing.assert_close(a.float(), c.float(), atol=2e-2, rtol=2e-2)


BACKWARD_CASES = [
    dict(),
    dict(causal=True),
    dict(causal=True, causal_alignment="top_left", softcap=3.0),
    dict(window=(10, 4), alibi=True),
    dict(sinks=True, causal=True),
]


def check_backward(q, k, v, case, g, kernel, deterministic=False, tile=None):
    """attention_backward with `kernel` (into NaN-poisoned gradients) against autograd of the float64
    reference, then a second run (poisoned again) that must give the same bits (our kernels always;
    cuDNN's when deterministic). With `tile`: that flash backward tile through the plan API (skips
    where it is not offered), the SKU naming it."""
    dt = q.dtype
    kw, ref = _rule_inputs(case, q.shape[2], g, dt, q.shape[0])
    out, lse = bc.attention(q, k, v, return_lse=True, **kw)
    gout = rnd(out.shape, dt, g)
    if tile is None:
        def backward():
            poisoned = {f"grad_{n}": torch.full_like(t, float("nan")) for n, t in zip("qkv", (q, k, v))}
            return bc.attention_backward(gout, q, k, v, out, lse, kernel=kernel, deterministic=deterministic,
                                         **poisoned, **kw)
    else:
        wl, wr = kw.get("window", (-1, -1))
        try:
            plan = bc.AttentionPlan.select(bc.AttentionDescriptor(
                "attention_backward", spec(q), spec(k), spec(v), spec(out), tile=tile, causal=kw.get("causal", False),
                causal_alignment=kw.get("causal_alignment", "bottom_right"), window_left=wl, window_right=wr,
                softcap=kw.get("softcap", 0.0), scale=kw.get("scale"), alibi=int("alibi_slopes" in kw),
                sinks="sinks" in kw, deterministic=deterministic))
        except errors.InvalidArgument:
            pytest.skip(f"no {tile} flash backward in this build or on this device")
        assert plan.sku.name == f"attention.flash_backward.{tile}.d{q.shape[-1]}"
        ws = torch.empty(plan.workspace_bytes(), device=DEV, dtype=torch.uint8)
        extras = {n: kw[n] for n in ("alibi_slopes", "sinks") if n in kw}

        def backward():
            grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
            more = {}
            if "sinks" in kw:
                grads.append(torch.full_like(kw["sinks"], float("nan")))
                more["grad_sinks"] = grads[-1]
            plan.run(q=q, k=k, v=v, out=out, lse=lse, grad_out=gout, grad_q=grads[0], grad_k=grads[1],
                     grad_v=grads[2], workspace=ws, **extras, **more)
            return grads
    label = tile or kernel
    grads = backward()
    leaves = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
    if "sinks" in ref:
        ref["sinks"] = ref["sinks"].detach().clone().double().requires_grad_()
        leaves.append(ref["sinks"])
    want, _ = ref_attention(*leaves[:3], **ref)
    wgrads = torch.autograd.grad(want, leaves, gout.double())
    assert len(grads) == len(wgrads)
    for name, a, b in zip(("grad_q", "grad_k", "grad_v", "grad_sinks"), grads, wgrads):
        check_close(a, b, dt, f"{label} {name} {case}", GRAD_TOL)
    if kernel == "cudnn" and not deterministic:
        return
    for a, b in zip(grads, backward()):
        assert torch.equal(a, b), f"the {label} backward is not bitwise reproducible"


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", BACKWARD_CASES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "plain")
def test_backward_against_autograd(dt, case):
    g = gen(21)
    B, Sq, Sk, Hq, Hkv, D = 2, 37, 53, 4, 2, 64
    q, k, v = rnd((B, Sq, Hq, D), dt, g), rnd((B, Sk, Hkv, D), dt, g), rnd((B, Sk, Hkv, D), dt, g)
    check_backward(q, k, v, case, g, "rowwise")


@pytest.mark.skipif(not HAS_FLASH, reason="no flash kernels in this build")
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("case", BACKWARD_CASES + [dict(window=(40, -1), causal_alignment="top_left")],
                         ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "plain")
def test_flash_backward_against_autograd(dt, d, case):
    g = gen(d + 3)
    B, Sq, Sk, Hq, Hkv = 2, 97, 141, 8, 2
    q, k, v = rnd((B, Sq, Hq, d), dt, g), rnd((B, Sk, Hkv, d), dt, g), rnd((B, Sk, Hkv, d), dt, g)
    check_backward(q, k, v, case, g, "flash")


@pytest.mark.skipif(not HAS_FLASH, reason="no flash kernels in this build")
@pytest.mark.parametrize("d,tile", [(64, "m128n64"), (64, "m64n64"), (64, "m128n128"), (128, "m128n64"),
                                    (128, "m128n32"), (128, "m64n64")])
def test_flash_forward_tiles(d, tile):
    dt = torch.bfloat16
    g = gen(d)
    q, k, v = rnd((2, 200, 4, d), dt, g), rnd((2, 333, 2, d), dt, g), rnd((2, 333, 2, d), dt, g)
    # The last two take each tile's general score kernel (a softcap, a negative scale); the others
    # its plain-score one.
    for kw in (dict(causal=True), dict(window=(50, 10)), dict(), dict(causal=True, softcap=5.0), dict(scale=-0.05)):
        out = torch.full((2, 200, 4, d), float("nan"), device=DEV, dtype=dt)
        lse = torch.empty((2, 4, 200), device=DEV)
        plan = bc.AttentionPlan.select(bc.AttentionDescriptor(
            "attention", *(bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), ()) for t in (q, k, v, out)), lse=True,
            tile=tile, causal=kw.get("causal", False), window_left=kw.get("window", (-1, -1))[0],
            window_right=kw.get("window", (-1, -1))[1], softcap=kw.get("softcap", 0.0), scale=kw.get("scale")))
        assert plan.sku.name == f"attention.flash.{tile}.d{d}"
        plan.run(q=q, k=k, v=v, out=out, lse=lse)
        want, wlse = ref_attention(q, k, v, causal=kw.get("causal", False), window=kw.get("window", (-1, -1)),
                                   softcap=kw.get("softcap", 0.0), scale=kw.get("scale"))
        check_close(out, want, dt, f"tile {tile} {kw}")
        check_lse(lse, wlse)
    with pytest.raises(errors.InvalidArgument, match="tile"):
        bc.AttentionPlan.select(bc.AttentionDescriptor(
            "attention", *(bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), ()) for t in (q, k, v, out)),
            tile="m1n1"))


def _wgmma_available(d, tile):
    if not HAS_FLASH:
        return False
    spec = bc.TensorSpec((1, 1, 1, d), bc.bfloat16, ())
    try:
        bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec, spec, spec, spec, tile=tile))
        return True
    except errors.InvalidArgument:
        return False


@pytest.mark.parametrize("tile", ["w64n64", "w128n64", "w128n128"])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("rule", [dict(), dict(causal=True)] + RULES,
                         ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "plain")
@pytest.mark.parametrize("sq,sk,hq,hkv", [(200, 333, 4, 2), (1, 129, 8, 1), (127, 64, 4, 4), (1000, 1000, 2, 1)])
def test_flash_forward_wgmma(tile, dt, d, rule, sq, sk, hq, hkv):
    """The sm_90a forward (tiles 'w64n64' / 'w128n64': one or two warpgroups, S = Q K^T and O = P V on
    warpgroup MMA; 'w128n128': a producer warpgroup and two consumers over a two-stage ring) against
    the float64 reference: every score rule, GQA / MQA, lengths below, at and past a tile, both
    16-bit dtypes."""
    if not _wgmma_available(d, tile):
        pytest.skip("no sm_90a flash kernel in this build or on this device")
    g = gen(d + sq + sk + hq)
    q, k, v = rnd((2, sq, hq, d), dt, g), rnd((2, sk, hkv, d), dt, g), rnd((2, sk, hkv, d), dt, g)
    kw, ref = _rule_inputs(rule, hq, g, dt, 2)
    out = torch.full((2, sq, hq, d), float("nan"), device=DEV, dtype=dt)
    lse = torch.empty((2, hq, sq), device=DEV)
    wl, wr = kw.get("window", (-1, -1))
    plan = bc.AttentionPlan.select(bc.AttentionDescriptor(
        "attention", *(bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), ()) for t in (q, k, v, out)), lse=True,
        tile=tile, causal=kw.get("causal", False), causal_alignment=kw.get("causal_alignment", "bottom_right"),
        window_left=wl, window_right=wr, softcap=kw.get("softcap", 0.0), scale=kw.get("scale"),
        alibi=int("alibi_slopes" in kw), sinks="sinks" in kw))
    assert plan.sku.name == f"attention.flash.{tile}.d{d}"
    extras = {n: kw[n] for n in ("alibi_slopes", "sinks") if n in kw}
    plan.run(q=q, k=k, v=v, out=out, lse=lse, **extras)
    want, wlse = ref_attention(q, k, v, **ref)
    check_close(out, want, dt, f"{tile} {rule}")
    check_lse(lse, wlse)


@pytest.mark.parametrize("tile", ["w64n64", "w128n64", "w128n128"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_flash_forward_wgmma_varlen(tile, d):
    """Packed sequences (an empty one, keys past seqused_k) on the sm_90a tiles: the warp-specialized
    tile copies them by cp.async (TMA would bring a neighbour's rows where the sequence ends), dense
    batches by TMA; a BHSD view (head-major strides) takes TMA too."""
    if not _wgmma_available(d, tile):
        pytest.skip("no sm_90a flash kernel in this build or on this device")
    dt = torch.bfloat16
    g = gen(d + len(tile))
    lq, lk = [5, 0, 130, 64], [9, 3, 200, 64]
    cu_q = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device=DEV)
    used = torch.tensor([9, 2, 150, 64], dtype=torch.int32, device=DEV)
    q, k, v = rnd((sum(lq), 8, d), dt, g), rnd((sum(lk), 2, d), dt, g), rnd((sum(lk), 2, d), dt, g)
    for seqused in (None, used):
        out = torch.full(q.shape, float("nan"), device=DEV, dtype=dt)
        plan = bc.AttentionPlan.select(bc.AttentionDescriptor(
            "attention", spec(q), spec(k), spec(v), spec(out), causal=True, varlen=True, batch=len(lq),
            max_seqlen_q=max(lq), max_seqlen_k=max(lk), seqused_k=seqused is not None, tile=tile))
        assert tile in plan.sku.name
        extra = {} if seqused is None else {"seqused_k": seqused}
        plan.run(q=q, k=k, v=v, out=out, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **extra)
        want, _ = ref_attention(q, k, v, causal=True, cu_q=cu_q, cu_k=cu_k, seqused_k=seqused)
        check_close(out, want, dt, f"{tile} varlen seqused={seqused is not None}")
    # [B, H, S, D] memory seen as [B, S, H, D]: strided rows and heads
    qh, kh, vh = (rnd((2, hh, s_, d), dt, g) for hh, s_ in ((8, 150), (2, 260), (2, 260)))
    q, k, v = (t.transpose(1, 2) for t in (qh, kh, vh))
    out = torch.full(q.shape, float("nan"), device=DEV, dtype=dt)
    plan = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec(q), spec(k), spec(v), spec(out),
                                                          tile=tile))
    plan.run(q=q, k=k, v=v, out=out)
    want, _ = ref_attention(q, k, v)
    check_close(out, want, dt, f"{tile} BHSD view")


@pytest.mark.parametrize("tile", ["w64n64", "w128n128"])
def test_flash_forward_wgmma_broadcast_kv(tile):
    """k / v broadcast by stride 0 (expanded over the batch, then over the kv heads): the
    warp-specialized tile's TMA descriptors take no zero stride, so it loads those by cp.async."""
    d = 128
    if not _wgmma_available(d, tile):
        pytest.skip("no sm_90a flash kernel in this build or on this device")
    dt = torch.bfloat16
    g = gen(len(tile) + 5)
    q = rnd((3, 200, 8, d), dt, g)
    for k0, v0, shape in (((1, 300, 2, d), (1, 300, 2, d), (3, 300, 2, d)),
                          ((3, 300, 1, d), (3, 300, 1, d), (3, 300, 4, d))):
        k, v = rnd(k0, dt, g).expand(shape), rnd(v0, dt, g).expand(shape)
        for causal in (False, True):
            out = torch.full(q.shape, float("nan"), device=DEV, dtype=dt)
            plan = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec(q), spec(k), spec(v), spec(out),
                                                                  causal=causal, tile=tile))
            plan.run(q=q, k=k, v=v, out=out)
            want, _ = ref_attention(q, k, v, causal=causal)
            check_close(out, want, dt, f"{tile} k / v {shape} by stride 0, causal={causal}")


@pytest.mark.parametrize("tile", ["w64n64", "w128n64", "w128n128"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_flash_forward_wgmma_one_tile_parts(tile, d):
    """The sm_90a forward's two products apart, on one 64-key tile, so that a failure says which:
    q = 0 gives uniform P, so out is the mean of v's rows (O = P V alone); v = the identity's rows
    gives out = P itself (S = Q K^T and the softmax alone), compared row by row."""
    if not _wgmma_available(d, tile):
        pytest.skip("no sm_90a flash kernel in this build or on this device")
    dt, sq, sk = torch.bfloat16, 100, 64
    g = gen(d * 7)
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), ())  # noqa: E731
    k = rnd((1, sk, 1, d), dt, g)

    def go(q, v):
        out = torch.full((1, sq, 1, d), float("nan"), device=DEV, dtype=dt)
        plan = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec(q), spec(k), spec(v), spec(out),
                                                              tile=tile))
        plan.run(q=q, k=k, v=v, out=out)
        return out

    v = rnd((1, sk, 1, d), dt, g)
    out = go(torch.zeros((1, sq, 1, d), device=DEV, dtype=dt), v)
    want = v.double().mean(dim=1, keepdim=True).expand(1, sq, 1, d)
    check_close(out, want, dt, f"{tile}: O = P V with uniform P")
    q = rnd((1, sq, 1, d), dt, g)
    eye = torch.zeros((1, sk, 1, d), device=DEV, dtype=dt)
    eye[0, torch.arange(sk), 0, torch.arange(sk)] = 1
    out = go(q, eye)
    want, _ = ref_attention(q, k, eye)
    for i in range(sq):
        check_close(out[:, i:i + 1], want[:, i:i + 1], dt, f"{tile}: P row {i} (S = Q K^T, softmax)")


@pytest.mark.parametrize("tile", ["w64n64", "m64n64"])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", BACKWARD_CASES + [dict(window=(40, -1), causal_alignment="top_left")],
                         ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "plain")
@pytest.mark.parametrize("sq,sk,hq,hkv,bhsd", [(97, 141, 8, 2, False), (200, 64, 4, 4, True), (1, 129, 4, 1, False)])
def test_flash_backward_tiles(tile, dt, d, case, sq, sk, hq, hkv, bhsd):
    """The flash backward's tiles by name ('w64n64': the sm_90a kernels, every product on warpgroup
    MMA; 'm64n64': mma.sync) against autograd of the float64 reference, into NaN-poisoned gradients,
    then bitwise equal over a repeat: every score rule, GQA / MQA, one query, one key tile, BHSD views."""
    if not HAS_FLASH:
        pytest.skip("no flash kernels in this build")
    g = gen(d + sq + sk + hq + len(case))
    if bhsd:  # [B, H, S, D] memory seen as [B, S, H, D]
        q, k, v = (rnd((2, hh, s_, d), dt, g).transpose(1, 2) for hh, s_ in ((hq, sq), (hkv, sk), (hkv, sk)))
    else:
        q, k, v = rnd((2, sq, hq, d), dt, g), rnd((2, sk, hkv, d), dt, g), rnd((2, sk, hkv, d), dt, g)
    check_backward(q, k, v, case, g, "flash", tile=tile)


@pytest.mark.parametrize("kernel", KERNELS)
def test_backward_varlen(kernel):
    dt = torch.float32 if kernel == "rowwise" else torch.bfloat16
    g = gen(4)
    lq, lk = [7, 40, 1], [7, 33, 50]
    cu_q = torch.tensor([0, 7, 47, 48], dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0, 7, 40, 90], dtype=torch.int32, device=DEV)
    d = 32 if kernel == "rowwise" else 64
    q, k, v = rnd((48, 4, d), dt, g), rnd((90, 2, d), dt, g), rnd((90, 2, d), dt, g)
    kw = dict(causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lq), max_seqlen_k=max(lk))
    out, lse = bc.attention(q, k, v, return_lse=True, **kw)
    gout = rnd(out.shape, dt, g)
    grads = bc.attention_backward(gout, q, k, v, out, lse, kernel=kernel, **kw)
    leaves = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
    want, _ = ref_attention(*leaves, causal=True, cu_q=cu_q, cu_k=cu_k)
    for a, b in zip(grads, torch.autograd.grad(want, leaves, gout.double())):
        check_close(a, b, dt, "varlen grad", GRAD_TOL)


def test_torch_autograd_and_sdpa_form():
    import baracuda.torch as bt
    dt = torch.bfloat16
    g = gen(8)
    q, k, v = (rnd((2, 8, 100, 64), dt, g).requires_grad_() for _ in range(3))
    ours = bt.scaled_dot_product_attention(q, k, v, is_causal=True)
    gout = rnd(ours.shape, dt, g)
    gq, gk, gv = torch.autograd.grad(ours, (q, k, v), gout)
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    want = F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
    wq, wk, wv = torch.autograd.grad(want, (qd, kd, vd), gout.double())
    check_close(ours, want, dt, "sdpa out")
    for a, b in ((gq, wq), (gk, wk), (gv, wv)):
        check_close(a, b, dt, "sdpa grad", GRAD_TOL)
    # the functional op routes a tensor that requires grad through autograd (no silent detach)
    o2 = bc.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True,
                      causal_alignment="top_left")
    assert o2.grad_fn is not None


def test_torch_compile_fullgraph():
    import baracuda.torch as bt
    g = gen(12)
    q, k, v = (rnd((1, 64, 4, 64), torch.float16, g) for _ in range(3))
    fn = torch.compile(lambda a, b, c: bt.attention(a, b, c, causal=True) * 2, fullgraph=True)
    torch.testing.assert_close(fn(q, k, v), bt.attention(q, k, v, causal=True) * 2)


def test_errors():
    q = torch.randn(1, 4, 4, 64, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(errors.InvalidArgument, match="multiple"):
        bc.attention(q, q[:, :, :3], q[:, :, :3])
    with pytest.raises(errors.InvalidDType, match="k is"):
        bc.attention(q, q.float(), q)
    with pytest.raises(errors.Unsupported, match="dropout"):
        bc.attention(q, q, q, dropout_p=0.1)
    with pytest.raises(errors.Unsupported, match="flash"):
        bc.attention(q.float(), q.float(), q.float(), kernel="flash")
    with pytest.raises(errors.InvalidArgument, match="q"):
        bc.attention(q.cpu(), q, q)
    with pytest.raises(errors.InvalidArgument, match="max_seqlen"):
        bc.attention(q[0], q[0], q[0], cu_seqlens_q=torch.zeros(2, dtype=torch.int32, device=DEV),
                     cu_seqlens_k=torch.zeros(2, dtype=torch.int32, device=DEV))


# ---- the cuDNN backend (builds with BARACUDA_ENABLE_CUDNN; libcudnn loaded at run time) ----
HAS_CUDNN = bc.features().get("cudnn", False)
needs_cudnn = pytest.mark.skipif(not HAS_CUDNN, reason="no cuDNN backend in this build")


def _plan(q, k, v, out, **kw):
    return bc.AttentionPlan.select(bc.AttentionDescriptor(
        "attention", *map(spec, (q, k, v, out)),
        **kw))


@needs_cudnn
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2), (4, 1)])
def test_cudnn_forward(dt, d, causal, hq, hkv):
    g = gen(d + 2 * causal + hkv)
    B, Sq, Sk = 2, 77, 130
    q, k, v = rnd((B, Sq, hq, d), dt, g), rnd((B, Sk, hkv, d), dt, g), rnd((B, Sk, hkv, d), dt, g)
    out, lse = run(q, k, v, "cudnn", causal=causal)
    want, wlse = ref_attention(q, k, v, causal=causal)
    check_close(out, want, dt, f"cudnn d={d}")
    check_lse(lse, wlse)
    assert _plan(q, k, v, out, causal=causal).sku.name == f"attention.cudnn.forward.d{d}"


CUDNN_RULES = [  # what cuDNN takes: both causal alignments, left windows, a scale
    (dict(causal=True, causal_alignment="top_left"), (150, 70)),
    (dict(causal=True), (70, 150)),
    (dict(window=(16, 0)), (70, 150)),
    (dict(window=(16, 0), causal_alignment="top_left"), (64, 64)),
    (dict(scale=0.3), (1, 129)),
]


@needs_cudnn
@pytest.mark.parametrize("rule,shape", CUDNN_RULES, ids=lambda r: str(r))
def test_cudnn_rules(rule, shape):
    dt = torch.bfloat16
    sq, sk = shape
    g = gen(sq + sk)
    q, k, v = rnd((2, sq, 4, 128), dt, g), rnd((2, sk, 2, 128), dt, g), rnd((2, sk, 2, 128), dt, g)
    check_rule(q, k, v, "cudnn", rule, g)


@needs_cudnn
@pytest.mark.parametrize("rule", RULES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
@pytest.mark.parametrize("sq,sk", [(70, 150), (150, 70)])
def test_auto_routes_every_rule(rule, sq, sk):
    """kernel='auto' takes cuDNN where it can and our kernels where it cannot (rows that see no key):
    right either way. Sinks are cuDNN's sink token; softcap and ALiBi its score modifier."""
    dt = torch.bfloat16
    g = gen(sq * 3 + sk)
    q, k, v = rnd((2, sq, 4, 128), dt, g), rnd((2, sk, 1, 128), dt, g), rnd((2, sk, 1, 128), dt, g)
    kw = check_rule(q, k, v, "auto", rule, g)
    if ("softcap" in rule or "alibi" in rule) and sq <= sk:  # (150, 70) bottom-right: rows without keys
        wl, wr = kw.get("window", (-1, -1))
        rules = {n: kw[n] for n in ("causal", "causal_alignment", "softcap", "scale") if n in kw}
        plan = _plan(q, k, v, q, window_left=wl, window_right=wr, alibi=int("alibi_slopes" in kw), **rules)
        assert plan.sku.backend == bc.Backend.cudnn


SCORE_MODS = [  # softcap and ALiBi through cuDNN's score modifier, with the band it then applies
    dict(softcap=2.0),
    dict(causal=True, softcap=5.0, scale=0.3),
    dict(causal=True, causal_alignment="top_left", softcap=3.0),
    dict(alibi=True),
    dict(alibi=True, causal=True),
    dict(window=(-1, 7), alibi=True, softcap=4.0),
]


@needs_cudnn
@pytest.mark.parametrize("rule", SCORE_MODS, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
@pytest.mark.parametrize("sq,sk", [(70, 150), (128, 128), (1, 129)])  # every query row sees a key
def test_cudnn_softcap_alibi(rule, sq, sk):
    dt = torch.bfloat16
    g = gen(sq * 5 + sk)
    q, k, v = rnd((2, sq, 4, 128), dt, g), rnd((2, sk, 2, 128), dt, g), rnd((2, sk, 2, 128), dt, g)
    kw = check_rule(q, k, v, "cudnn", rule, g)
    if sq != 1:
        check_backward(q, k, v, rule, g, "cudnn", deterministic=True)
        check_backward(q, k, v, rule, g, "cudnn", deterministic=False)
    # packed sequences or sinks with a modifier stay ours, and kernel='cudnn' says why
    with pytest.raises(errors.Unsupported, match="dense batches without sinks"):
        run(q, k, v, "cudnn", sinks=torch.zeros(4, device=DEV), **kw)
    with pytest.raises(errors.Unsupported, match="not a left window"):  # cuDNN 9.19 refuses the graph
        run(q, k, v, "cudnn", **{**kw, "window": (20, 7)})
    if "alibi_slopes" in kw:  # slopes per sequence too stay ours
        kw["alibi_slopes"] = kw["alibi_slopes"].expand(2, -1).contiguous()
        with pytest.raises(errors.Unsupported, match="per head"):
            run(q, k, v, "cudnn", **kw)


@needs_cudnn
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 96, 256])
def test_cudnn_softcap_head_dims(dt, d):
    """Gemma-2's softcap under a causal band on cuDNN for both 16-bit dtypes and the other head dims
    (Gemma-2 uses 256): forward, and the backward where cuDNN takes it (else kernel='cudnn' names its
    refusal). Its sliding-window layers (a left window) stay ours, with the reason named."""
    g = gen(d + 3)
    B, Sq, Sk, Hq, Hkv = 2, 97, 141, 8, 4
    q, k, v = rnd((B, Sq, Hq, d), dt, g), rnd((B, Sk, Hkv, d), dt, g), rnd((B, Sk, Hkv, d), dt, g)
    rule = dict(causal=True, softcap=50.0)
    check_rule(q, k, v, "cudnn", rule, g)
    try:
        check_backward(q, k, v, rule, g, "cudnn", deterministic=True)
    except errors.Unsupported as e:
        assert "cudnn" in str(e).lower() and d == 256, e
    with pytest.raises(errors.Unsupported, match="not a left window"):
        run(q, k, v, "cudnn", softcap=30.0, window=(40, 0))


@needs_cudnn
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", [dict(), dict(causal=True), dict(window=(30, 0))],
                         ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "plain")
def test_cudnn_backward(dt, d, case):
    """cuDNN's deterministic backward against autograd in float64, bitwise equal over repeats; the
    default (atomic) one against the same reference."""
    g = gen(d + 5)
    B, Sq, Sk, Hq, Hkv = 2, 97, 141, 8, 2
    q, k, v = rnd((B, Sq, Hq, d), dt, g), rnd((B, Sk, Hkv, d), dt, g), rnd((B, Sk, Hkv, d), dt, g)
    check_backward(q, k, v, case, g, "cudnn", deterministic=True)
    check_backward(q, k, v, case, g, "cudnn", deterministic=False)


@needs_cudnn
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", [dict(sinks=True), dict(sinks=True, causal=True), dict(sinks=True, window=(40, 0))],
                         ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
def test_cudnn_sinks(d, case):
    """Sinks (a learned logit per head, gpt-oss style) on cuDNN: its sink token in the forward (lse
    includes it), grad_sinks from our kernels after cuDNN's backward."""
    dt = torch.bfloat16
    g = gen(d + 9)
    B, Sq, Sk, Hq, Hkv = 2, 97, 141, 8, 2
    q, k, v = rnd((B, Sq, Hq, d), dt, g), rnd((B, Sk, Hkv, d), dt, g), rnd((B, Sk, Hkv, d), dt, g)
    kw = check_rule(q, k, v, "cudnn", case, g)
    assert _plan(q, k, v, q, sinks=True, **{k: v for k, v in kw.items() if k in ("causal",)}).sku.backend \
        == bc.Backend.cudnn
    check_backward(q, k, v, case, g, "cudnn", deterministic=True)


@needs_cudnn
def test_cudnn_strided_outputs_and_graph_capture():
    """BHSD views in, outputs laid out otherwise (each stride pattern builds its own cuDNN graph), and
    the plan captured in a CUDA graph and replayed on new inputs."""
    dt = torch.bfloat16
    g = gen(31)
    qh, kh, vh = rnd((2, 4, 90, 64), dt, g), rnd((2, 2, 90, 64), dt, g), rnd((2, 2, 90, 64), dt, g)
    q, k, v = qh.transpose(1, 2), kh.transpose(1, 2), vh.transpose(1, 2)
    for out in (torch.full((2, 90, 4, 64), float("nan"), device=DEV, dtype=dt),
                torch.full((2, 4, 90, 64), float("nan"), device=DEV, dtype=dt).transpose(1, 2)):
        got = bc.attention(q, k, v, causal=True, kernel="cudnn", out=out)
        check_close(got, ref_attention(q, k, v, causal=True)[0], dt, f"cudnn out strides {out.stride()}")
    out, lse = run(q, k, v, "cudnn", causal=True)
    gout = rnd(out.shape, dt, g)
    grads = bc.attention_backward(gout, q, k, v, out, lse, causal=True, kernel="cudnn", deterministic=True)
    leaves = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
    want, _ = ref_attention(*leaves, causal=True)
    for a, b in zip(grads, torch.autograd.grad(want, leaves, gout.double())):
        check_close(a, b, dt, "cudnn grad of views", GRAD_TOL)
    # CUDA graph: capture one run, replay on new data in the same buffers
    qs, ks, vs = (t.contiguous() for t in (q, k, v))
    out = torch.empty_like(qs)
    plan = _plan(qs, ks, vs, out, causal=True, kernel="cudnn")
    ws = torch.empty(max(plan.workspace_bytes(), 1), dtype=torch.uint8, device=DEV)
    plan.run(q=qs, k=ks, v=vs, out=out, workspace=ws)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(q=qs, k=ks, v=vs, out=out, workspace=ws)
    for seed in (1, 2):
        g2 = gen(seed)
        for t in (qs, ks, vs):
            t.copy_(rnd(t.shape, dt, g2))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_close(out, ref_attention(qs, ks, vs, causal=True)[0], dt, "cudnn graph replay")


# ---- cuDNN on packed sequences and seqused_k: ragged offsets and lengths written on the device ----
def _packed(lq, lk, hq, hkv, d, dt, g, qkv_view=False):
    """q [sum(lq), hq, d] (a view into a fused [total, hq + 2 hkv, d] projection when qkv_view and
    lq == lk: rows strided past their heads), k / v [sum(lk), hkv, d], and the int32 offsets."""
    cu = lambda ls: torch.tensor([0] + [sum(ls[:i + 1]) for i in range(len(ls))], dtype=torch.int32, device=DEV)  # noqa: E731
    if qkv_view:
        qkv = rnd((sum(lq), hq + 2 * hkv, d), dt, g)
        q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    else:
        q, k, v = rnd((sum(lq), hq, d), dt, g), rnd((sum(lk), hkv, d), dt, g), rnd((sum(lk), hkv, d), dt, g)
    return q, k, v, cu(lq), cu(lk)


# sequences with no query, keys but no query, queries but no key, one token, more queries than keys
# (bottom-right causal: leading rows see no key), and longer ones
PACKED_LENGTHS = [([5, 0, 130, 64, 1, 7, 300], [9, 3, 200, 64, 1, 0, 280])]
PACKED_RULES = [dict(), dict(causal=True), dict(causal=True, causal_alignment="top_left"), dict(window=(32, 0)),
                dict(sinks=True, causal=True)]


@needs_cudnn
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("d,hq,hkv", [(128, 8, 2), (64, 4, 4)])
@pytest.mark.parametrize("rule", PACKED_RULES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "plain")
def test_cudnn_packed_forward_backward(dt, d, hq, hkv, rule):
    g = gen(d + hq + len(rule))
    lq, lk = PACKED_LENGTHS[0]
    q, k, v, cu_q, cu_k = _packed(lq, lk, hq, hkv, d, dt, g)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lq), max_seqlen_k=max(lk), **rule)
    ref = dict(causal=rule.get("causal", False), top_left=rule.get("causal_alignment") == "top_left",
               window=rule.get("window", (-1, -1)))
    if kw.pop("sinks", False):  # a row that sees no key: out 0, lse = its sink
        kw["sinks"] = ref["sinks"] = torch.randn(hq, generator=g, device=DEV) * 2
    out, lse = run(q, k, v, "cudnn", **kw)
    want, wlse = ref_attention(q, k, v, cu_q=cu_q, cu_k=cu_k, **ref)
    check_close(out, want, dt, f"cudnn packed {rule}")
    check_lse(lse, wlse)
    plan = bc.AttentionPlan.select(bc.AttentionDescriptor(
        "attention", *map(spec, (q, k, v, out)),
        varlen=True, batch=len(lq), max_seqlen_q=max(lq), max_seqlen_k=max(lk), causal=rule.get("causal", False)))
    assert plan.sku.backend == bc.Backend.cudnn and plan.sku.layout == "varlen"
    gout = rnd(out.shape, dt, g)
    leaves = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
    if "sinks" in ref:
        ref["sinks"] = ref["sinks"].detach().clone().double().requires_grad_()
        leaves.append(ref["sinks"])
    wgrads = torch.autograd.grad(ref_attention(*leaves[:3], cu_q=cu_q, cu_k=cu_k, **ref)[0], leaves, gout.double())
    for deterministic in (True, False):
        poisoned = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        grads = bc.attention_backward(gout, q, k, v, out, lse, grad_q=poisoned[0], grad_k=poisoned[1],
                                      grad_v=poisoned[2], kernel="cudnn", deterministic=deterministic, **kw)
        assert len(grads) == len(wgrads)
        for name, a, b in zip(("grad_q", "grad_k", "grad_v", "grad_sinks"), grads, wgrads):
            check_close(a, b, dt, f"cudnn packed {name} deterministic={deterministic}", GRAD_TOL)
        if deterministic:
            again = bc.attention_backward(gout, q, k, v, out, lse, kernel="cudnn", deterministic=True, **kw)
            assert all(torch.equal(a, b) for a, b in zip(grads, again)), "cuDNN's deterministic backward differs"


@needs_cudnn
def test_cudnn_packed_views_seqused_and_auto():
    """q / k / v as views of one fused projection (rows strided past their heads), seqused_k, and
    kernel='auto' taking cuDNN for packed sequences; the flash kernel agrees."""
    dt = torch.bfloat16
    g = gen(71)
    lens = [33, 1, 250, 0, 97]
    q, k, v, cu, _ = _packed(lens, lens, 8, 2, 128, dt, g, qkv_view=True)
    used = torch.tensor([20, 1, 250, 0, 3], dtype=torch.int32, device=DEV)
    for seqused in (None, used):
        kw = dict(causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens),
                  seqused_k=seqused)
        out, lse = run(q, k, v, "auto", **kw)
        want, wlse = ref_attention(q, k, v, causal=True, cu_q=cu, cu_k=cu, seqused_k=seqused)
        check_close(out, want, dt, f"cudnn packed views seqused={seqused is not None}")
        check_lse(lse, wlse)
        gout = rnd(out.shape, dt, g)
        grads = bc.attention_backward(gout, q, k, v, out, lse, kernel="cudnn", deterministic=True, **kw)
        leaves = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
        wgrads = torch.autograd.grad(ref_attention(*leaves, causal=True, cu_q=cu, cu_k=cu, seqused_k=seqused)[0],
                                     leaves, gout.double())
        for name, a, b in zip(("grad_q", "grad_k", "grad_v"), grads, wgrads):
            check_close(a, b, dt, f"cudnn packed views {name}", GRAD_TOL)
    if HAS_FLASH:
        flash, _ = run(q, k, v, "flash", causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=250,
                       max_seqlen_k=250)
        cud, _ = run(q, k, v, "cudnn", causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=250,
                     max_seqlen_k=250)
        torch.testing.assert_close(flash.float(), cud.float(), atol=2e-2, rtol=2e-2)


@needs_cudnn
def test_cudnn_dense_seqused_k():
    """Dense [B, S, H, D] with seqused_k: cuDNN's padding mask; rows that see no key (bottom-right
    causal with fewer keys than queries) and key rows past seqused_k get zeros."""
    dt = torch.float16
    g = gen(73)
    q, k, v = rnd((3, 40, 4, 64), dt, g), rnd((3, 60, 2, 64), dt, g), rnd((3, 60, 2, 64), dt, g)
    used = torch.tensor([60, 17, 0], dtype=torch.int32, device=DEV)
    for rule in (dict(causal=True), dict()):
        out, lse = run(q, k, v, "cudnn", seqused_k=used, **rule)
        want, wlse = ref_attention(q, k, v, seqused_k=used, causal=rule.get("causal", False))
        check_close(out, want, dt, f"cudnn dense seqused {rule}")
        check_lse(lse, wlse)
        gout = rnd(out.shape, dt, g)
        poisoned = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        grads = bc.attention_backward(gout, q, k, v, out, lse, grad_q=poisoned[0], grad_k=poisoned[1],
                                      grad_v=poisoned[2], kernel="cudnn", seqused_k=used, **rule)
        leaves = [t.detach().clone().double().requires_grad_() for t in (q, k, v)]
        wgrads = torch.autograd.grad(ref_attention(*leaves, seqused_k=used, causal=rule.get("causal", False))[0],
                                     leaves, gout.double())
        for name, a, b in zip(("grad_q", "grad_k", "grad_v"), grads, wgrads):
            check_close(a, b, dt, f"cudnn dense seqused {name}", GRAD_TOL)


@needs_cudnn
def test_cudnn_packed_graph_replay_and_buckets():
    """One captured packed run replays for new offsets of the same batch; plans whose longest
    sequence differs within a bucket share cuDNN's graph and stay right."""
    dt = torch.bfloat16
    g = gen(79)
    total, B, hq, hkv, d = 512, 4, 4, 2, 64
    q, k, v = rnd((total, hq, d), dt, g), rnd((total, hkv, d), dt, g), rnd((total, hkv, d), dt, g)
    out = torch.empty_like(q)
    lse = torch.empty((hq, total), device=DEV)
    plan = bc.AttentionPlan.select(bc.AttentionDescriptor("attention", spec(q), spec(k), spec(v), spec(out),
                                                          causal=True, varlen=True, batch=B, max_seqlen_q=300,
                                                          max_seqlen_k=300, lse=True, kernel="cudnn"))
    ws = torch.empty(max(plan.workspace_bytes(), 1), dtype=torch.uint8, device=DEV)
    cu = torch.tensor([0, 100, 200, 300, 400], dtype=torch.int32, device=DEV)
    plan.run(q=q, k=k, v=v, out=out, lse=lse, cu_seqlens_q=cu, cu_seqlens_k=cu, workspace=ws)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(q=q, k=k, v=v, out=out, lse=lse, cu_seqlens_q=cu, cu_seqlens_k=cu, workspace=ws)
    for lens in ([300, 12, 0, 200], [1, 1, 1, 509 - 300]):
        cu.copy_(torch.tensor([0] + [sum(lens[:i + 1]) for i in range(B)], dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        n = int(cu[-1])
        want, wlse = ref_attention(q[:n], k[:n], v[:n], causal=True, cu_q=cu, cu_k=cu)
        check_close(out[:n], want, dt, f"cudnn packed replay {lens}")
        check_lse(lse[:, :n], wlse)
    for max_len in (257, 290, 300):  # one bucket: the same cuDNN graph
        lens = [max_len, 512 - max_len - 2, 1, 1]
        cu2 = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(B)], dtype=torch.int32, device=DEV)
        got, glse = run(q, k, v, "cudnn", causal=True, cu_seqlens_q=cu2, cu_seqlens_k=cu2, max_seqlen_q=max_len,
                        max_seqlen_k=max_len)
        want, wlse = ref_attention(q, k, v, causal=True, cu_q=cu2, cu_k=cu2)
        check_close(got, want, dt, f"cudnn packed max_seqlen {max_len}")
        check_lse(glse, wlse)
