"""Checks of values that live on the device (class-index targets, embedding indices): the kernels
give a NaN row for a bad one (no sync, graph-safe); these opt-in checks (``check_targets=True``,
``check_indices=True``) run one small pass and a host sync to raise InvalidArgument naming the
first offending entry instead."""
from . import _interop
from ._dtypes import DType
from .errors import InvalidArgument, Unsupported


# ---- class-index targets: a typed error for values out of range ------------------------------------
# The kernels give NaN for such a row (no sync, graph-safe); with check_targets=True (opt-in:
# no functional op synchronizes the host by default) one small pass over the targets and a host sync turn that into an
# InvalidArgument naming the first offending entry.
def _host(x):
    fw = _interop.framework(x)
    if fw == "torch":
        return x.detach().cpu().numpy()
    if fw == "cupy":
        return x.get()
    import numpy as np
    return np.asarray(x)


def _raise_first_bad(op, bad, target, what, name="target"):
    import numpy as np
    b, t = _host(bad), _host(target)
    idx = tuple(int(i) for i in np.argwhere(b)[0])
    raise InvalidArgument(f"{op}: {name}{list(idx)} = {int(t[idx])} {what}")


def _refused_by_our_ops(fn):
    """Runs a target check; a target our elementwise ops refuse (a CPU tensor, say) is left to the
    loss plan, whose error names it as the loss's `target`."""
    try:
        return fn()
    except (InvalidArgument, Unsupported):
        return None


def _check_indices(op, indices, n, stream=None):
    """Every index in [0, n) (embedding's opt-in check)."""
    _check_class_targets(op, indices, n, stream=stream, name="indices")


def _check_class_targets(op, target, n_classes, ignore_index=None, stream=None, name="target"):
    """Every target in [0, n_classes) or equal to ignore_index."""
    import baracuda as bc
    if any(int(s) == 0 for s in target.shape):
        return

    def bad_mask():
        bad = bc.logical_or(bc.lt(target, 0, stream=stream), bc.ge(target, n_classes, stream=stream), stream=stream)
        if ignore_index is not None and not 0 <= ignore_index < n_classes:
            bad = bc.logical_and(bad, bc.ne(target, ignore_index, stream=stream), stream=stream)
        return bad, bool(bc.any(bad, stream=stream))
    found = _refused_by_our_ops(bad_mask)
    if found is not None and found[1]:
        ign = f" and is not ignore_index = {ignore_index}" if ignore_index is not None else ""
        _raise_first_bad(op, found[0], target, f"is outside [0, {n_classes}){ign}", name)


def _check_multilabel_targets(op, target, n_classes, stream=None):
    """Per row: the entries before the first negative one in [0, n_classes), and that negative one -1."""
    if any(int(s) == 0 for s in target.shape):
        return
    found = _refused_by_our_ops(lambda: _multilabel_bad_mask(target, n_classes, stream))
    if found is not None and found[1]:
        _raise_first_bad(op, found[0], target, f"is outside [0, {n_classes}) before the list's end (-1)")


def _multilabel_bad_mask(target, n_classes, stream):
    import baracuda as bc
    nonneg = bc.cast(bc.ge(target, 0, stream=stream), DType.int32, stream=stream)
    listed = bc.cumprod(nonneg, -1, stream=stream)          # 1 up to the first negative entry
    ended = bc.cast(bc.eq(listed, 0, stream=stream), DType.int32, stream=stream)
    first_neg = bc.eq(bc.cumsum(ended, -1, stream=stream), 1, stream=stream)  # the first entry past the list
    too_big = bc.logical_and(bc.eq(listed, 1, stream=stream), bc.ge(target, n_classes, stream=stream), stream=stream)
    below = bc.logical_and(bc.logical_and(first_neg, bc.eq(ended, 1, stream=stream), stream=stream),
                           bc.lt(target, -1, stream=stream), stream=stream)
    bad = bc.logical_or(too_big, below, stream=stream)
    return bad, bool(bc.any(bad, stream=stream))
