"""Functional CTC loss: ``ctc_loss`` (log_probs [T, N, C] or unbatched [T, C], padded or concatenated
targets, lengths on the device or the host) and ``ctc_loss_backward`` from the saved log_alpha."""
from . import _C, _interop
from ._loss import _CACHE, _as_operand, _key, _spec
from .errors import InvalidArgument


# ---- CTC loss -------------------------------------------------------------------------------------
def _ctc_host_ints(v):
    """Lengths given on the host (an int, a sequence, a numpy array, a CPU torch tensor) as a list of
    ints; None for a device tensor."""
    if isinstance(v, bool):
        raise InvalidArgument("ctc_loss: lengths must be integers, got a bool")
    if isinstance(v, int) or (not _interop.is_array(v) and hasattr(v, "__index__")):
        return [int(v)]
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    fw = _interop.framework(v)
    if fw == "numpy" or (fw == "torch" and v.device.type == "cpu"):
        if "int" not in str(v.dtype):
            raise InvalidArgument(f"ctc_loss: lengths must be integers, got dtype {v.dtype}")
        return [int(x) for x in v.reshape(-1).tolist()]
    return None


def _ctc_to_device(values, like, dtype="int64"):
    """Host integers (a list, numpy array or CPU torch tensor) as a device array next to `like`."""
    fw = _interop.framework(like)
    if fw == "torch":
        import torch

        return torch.as_tensor(values, dtype=getattr(torch, dtype)).to(like.device)
    if fw == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.asarray(values, dtype=dtype)
    if fw == "jax":
        import jax
        import jax.numpy as jnp

        return jax.device_put(jnp.asarray(values, dtype=jnp.int32), next(iter(like.devices())))
    raise InvalidArgument("ctc_loss: host lengths / targets need torch, CuPy or JAX log_probs; pass device tensors")


def _ctc_prepare(op, log_probs, targets, input_lengths, target_lengths, max_target_length):
    """Views log_probs as [T, N, C] and targets as [N, S] / [total], checks host lengths as torch does
    and moves them to the device. Returns (lp3, targets, il, tl, max_target_length, unbatched)."""
    if _interop.framework(log_probs) == "numpy":
        raise InvalidArgument(f"{op}: log_probs is a numpy (CPU) array; expected a CUDA tensor")
    rank = len(log_probs.shape)
    if rank not in (2, 3):
        raise InvalidArgument(f"{op}: log_probs must have shape [T, N, C] or [T, C] (unbatched), "
                              f"got {tuple(log_probs.shape)}")
    unbatched = rank == 2
    tfw = _interop.framework(targets) if _interop.is_array(targets) else "host"
    if tfw in ("numpy", "host") or (tfw == "torch" and targets.device.type == "cpu"):
        targets = _ctc_to_device(targets, log_probs, "int64" if "int32" not in str(getattr(targets, "dtype", "")) else
                                 "int32")
    if unbatched:
        if len(targets.shape) != 1:
            raise InvalidArgument(f"{op}: unbatched log_probs [T, C] takes 1-D targets [S], got {tuple(targets.shape)}")
        log_probs = log_probs[:, None, :]
        targets = targets[None, :]
    T, N = int(log_probs.shape[0]), int(log_probs.shape[1])
    concat = len(targets.shape) == 1
    lens = []
    for name, v in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        host = _ctc_host_ints(v)
        if host is not None:
            if len(host) != N:
                raise InvalidArgument(f"{op}: {name} has {len(host)} entries; expected one per sample (N = {N})")
            lens.append((host, None))
        else:
            if unbatched and len(v.shape) == 0:
                v = v.reshape(1)
            lens.append((None, v))
    (il_host, il_dev), (tl_host, tl_dev) = lens
    if il_host is not None:
        for i, x in enumerate(il_host):
            if not 0 <= x <= T:
                raise InvalidArgument(f"{op}: input_lengths[{i}] = {x} is outside [0, T = {T}]")
        il_dev = _ctc_to_device(il_host, log_probs)
    if tl_host is not None:
        for i, x in enumerate(tl_host):
            if x < 0:
                raise InvalidArgument(f"{op}: target_lengths[{i}] = {x} is negative")
            if not concat and x > int(targets.shape[1]):
                raise InvalidArgument(f"{op}: target_lengths[{i}] = {x} exceeds the padded targets' width "
                                      f"S = {int(targets.shape[1])}")
        if concat and sum(tl_host) != int(targets.shape[0]):
            raise InvalidArgument(f"{op}: the target lengths add up to {sum(tl_host)}, but the concatenated targets "
                                  f"have {int(targets.shape[0])} labels")
        if max_target_length is None:
            max_target_length = max(tl_host, default=0)
        tl_dev = _ctc_to_device(tl_host, log_probs)
    if max_target_length is None:
        # Concatenated targets with device lengths: one device-to-host read of the maximum (pass
        # max_target_length= to avoid it). Padded targets: S.
        max_target_length = (int(tl_dev.max()) if N else 0) if concat else -1
    return log_probs, targets, il_dev, tl_dev, int(max_target_length), unbatched


def _ctc_plan(op, lp, targets, il, tl, blank, reduction, zero_infinity, max_target_length, grad_loss, grad):
    key = ("ctc", op, int(blank), reduction, bool(zero_infinity), int(max_target_length),
           _key(lp, targets, il, tl, grad_loss, grad))

    def make():
        d = _C.CtcLossDescriptor(op, _spec(lp), _spec(targets), _spec(il), _spec(tl), int(blank), reduction,
                                 bool(zero_infinity), int(max_target_length),
                                 None if grad_loss is None else _spec(grad_loss),
                                 None if grad is None else _spec(grad))
        return _C.CtcLossPlan.select(d)

    return _CACHE.get(key, make)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False, *,
             max_target_length=None, return_log_alpha=False, stream=None):
    """ctc_loss(log_probs [T, N, C] or [T, C], targets [N, S] padded or [sum(target_lengths)] concatenated
    (int64 / int32), input_lengths [N], target_lengths [N], blank=0, reduction="mean", zero_infinity=False,
    *, max_target_length=None, return_log_alpha=False, stream=None)

    torch.nn.functional.ctc_loss's semantics: per sample -log p(target | log_probs[:input_length]);
    mean = mean over the batch of loss_n / max(target_length_n, 1); zero_infinity turns infinite losses
    (no alignment exists) and their gradients into 0. Lengths: Python ints / sequences, numpy arrays,
    CPU tensors (checked here, with torch's errors, then copied to the device) or device int tensors
    (not checked on the host: an invalid sample gets a NaN loss). Concatenated targets with device
    lengths read max(target_lengths) back once unless max_target_length is given. With
    return_log_alpha, also returns log_alpha [N, T, 2 S + 1] (f32; f64 for f64), which
    ctc_loss_backward takes."""
    op = "ctc_loss"
    lp, tg, il, tl, mtl, unbatched = _ctc_prepare(op, log_probs, targets, input_lengths, target_lengths,
                                                  max_target_length)
    plan = _ctc_plan(op, lp, tg, il, tl, blank, reduction, zero_infinity, mtl, None, None)
    d = _interop.dtype_of(lp)
    n = int(lp.shape[1])
    out, out_finish = _interop.output(lp, (n,) if reduction == "none" else (), d)
    la, la_finish = _interop.output(lp, tuple(plan.log_alpha_shape()), plan.log_alpha_dtype())
    ws = _interop.workspace_allocator(lp)(plan.workspace_bytes())
    plan.run(lp, tg, il, tl, la, ws, out=out, stream=stream)
    loss = out_finish(out)
    if unbatched and reduction == "none":
        loss = loss.reshape(())
    return (loss, la_finish(la)) if return_log_alpha else loss


def ctc_loss_backward(grad_loss, log_probs, targets, input_lengths, target_lengths, log_alpha, blank=0,
                      reduction="mean", zero_infinity=False, *, out=None, stream=None):
    """ctc_loss_backward(grad_loss, log_probs, targets, input_lengths, target_lengths, log_alpha, blank=0,
    reduction="mean", zero_infinity=False, *, out=None, stream=None): the gradient w.r.t. log_probs
    (its shape and dtype) from the log_alpha that ctc_loss(..., return_log_alpha=True) returned.
    grad_loss: [] (or a number) for mean / sum, [N] for none. torch's formula, as torch.autograd gives
    it: (exp(lp) - posterior / p) * the reduction's scale for t < input_length, 0 past it."""
    op = "ctc_loss_backward"
    mtl = (int(log_alpha.shape[-1]) - 1) // 2 if len(log_alpha.shape) == 3 else None
    lp, tg, il, tl, mtl, unbatched = _ctc_prepare(op, log_probs, targets, input_lengths, target_lengths, mtl)
    d = _interop.dtype_of(lp)
    grad_loss = _as_operand(op, "grad_loss", grad_loss, lp)
    if unbatched and reduction == "none" and len(grad_loss.shape) == 0:
        grad_loss = grad_loss.reshape(1)
    finish = None
    user_out = out
    if out is None:
        out, finish = _interop.output(lp, tuple(lp.shape), d)
    elif unbatched:
        out = out[:, None, :]
    plan = _ctc_plan(op, lp, tg, il, tl, blank, reduction, zero_infinity, mtl, grad_loss, out)
    ws = _interop.workspace_allocator(lp)(plan.workspace_bytes())
    plan.run(lp, tg, il, tl, log_alpha, ws, grad_loss=grad_loss, grad_log_probs=out, stream=stream)
    if user_out is not None:
        return user_out
    g = finish(out)
    return g.reshape((int(g.shape[0]), int(g.shape[2]))) if unbatched else g


FUNCTIONS = {"ctc_loss": ctc_loss, "ctc_loss_backward": ctc_loss_backward}
