"""The one mechanism of baracuda.jax: the FFI target, and descriptor -> plan -> custom call."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _C
from .._dtypes import dtype as _bc_dtype
from ..errors import Unsupported

TARGET = "baracuda_plan"
_WORKSPACE_ALIGN = 256  # the handler aligns the workspace output's start up to this

_HANDLER = _C.xla_handler()
if _HANDLER is not None:
    jax.ffi.register_ffi_target(TARGET, _HANDLER, platform="CUDA")


def available() -> bool:
    """Whether this build has the XLA FFI handler (jaxlib's headers were found when it was built)."""
    return _HANDLER is not None


def routable(x) -> bool:
    """Whether a baracuda.<op> call on x runs here: the handler is built and x is a GPU array (a
    tracer counts: its placement is decided at lowering)."""
    if not available():
        return False
    if isinstance(x, jax.core.Tracer):
        return True
    return all(d.platform == "gpu" for d in x.devices())


# ---- the one mechanism: descriptor -> plan -> custom call -----------------------------------------

def _spec(shape, dtype, strides=None):
    return _C.TensorSpec(tuple(int(d) for d in shape), _bc_dtype(dtype), None if strides is None else list(strides))


def _spec_of(x):
    return _spec(x.shape, x.dtype)


def _transposed_spec(x):
    """The spec of x's last two dims swapped, read in place (x row-major): no copy."""
    *batch, r, c = x.shape
    strides = [1] * x.ndim
    for i in range(x.ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * int(x.shape[i + 1])
    return _spec((*batch, c, r), x.dtype, strides[:-2] + [1, c])


_PLANS = {}  # (descriptor, roles, specs) -> (plan id, workspace bytes)


def _launch(desc, select, inputs, outputs, aliases=None, select_key=None):
    """Runs the plan ``select(desc)`` on ``inputs`` [(role, array, spec)] and returns the arrays of
    ``outputs`` [(role, shape, dtype)] (each row-major). The plan is selected and registered once
    per descriptor and operand layout (and ``select_key``: what else ``select`` depends on, e.g. a
    preference). ``aliases`` {input index: output index}: an in-place plan's operand (listed as both,
    under one role) is one buffer (XLA copies the input when still live)."""
    if not available():
        raise Unsupported("baracuda.jax: this build has no XLA FFI handler (jaxlib was not installed when "
                          "baracuda was built); reinstall baracuda with jaxlib present")
    out_specs = [_spec(shape, dt) for _, shape, dt in outputs]
    roles = tuple(r for r, _, _ in inputs) + tuple(r for r, _, _ in outputs)
    specs = tuple(s for _, _, s in inputs) + tuple(out_specs)
    key = (desc, roles, specs, select_key)
    entry = _PLANS.get(key)
    if entry is None:
        plan = select(desc)
        entry = _PLANS[key] = (_C.xla_plan(plan, list(roles), list(specs), len(inputs)), plan.workspace_bytes())
    plan_id, ws = entry
    result = [jax.ShapeDtypeStruct(tuple(shape), dt) for _, shape, dt in outputs]
    if ws:
        result.append(jax.ShapeDtypeStruct((ws + _WORKSPACE_ALIGN,), jnp.uint8))
    outs = jax.ffi.ffi_call(TARGET, result, vmap_method="sequential", input_output_aliases=aliases)(
        *[a for _, a, _ in inputs], plan=np.int64(plan_id))
    return list(outs[:len(outputs)])


def _stats_dtype(x):
    return jnp.float64 if x.dtype == jnp.float64 else jnp.float32


def _operand(role, x):
    return (role, x, _spec_of(x))
