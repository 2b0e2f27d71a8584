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
