"""GPU tests are marked `gpu` and skip cleanly when no CUDA device (or no torch) is present."""
import pytest


def _gpu_available() -> bool:
    try:
        import baracuda

        return len(baracuda.devices()) > 0
    except Exception:
        return False


GPU = _gpu_available()


def pytest_collection_modifyitems(config, items):
    if GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionstart(session):
    # JAX's GPU client must start before torch / CuPy fill their memory pools (it aborts the
    # process otherwise); start it once, up front, without preallocation.
    if not GPU:
        return
    import os

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax

        jax.devices()
    except Exception:
        pass
