"""tools/wheel_variant.py: the CUDA 12 wheel's pyproject.toml (no GPU, no build)."""
import pathlib
import subprocess
import sys

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import wheel_variant  # noqa: E402


def _parse(text):
    return tomllib.loads(text)


def test_cuda12_rewrite_names_the_cu12_distribution_and_cublas():
    text = (ROOT / "pyproject.toml").read_text()
    base, cu12 = _parse(text), _parse(wheel_variant.rewrite(text, 12))
    assert base["project"]["name"] == "baracuda"
    assert cu12["project"]["name"] == "baracuda-cu12"
    for deps in (cu12["project"]["dependencies"], cu12["build-system"]["requires"]):
        assert any(d.startswith("nvidia-cublas-cu12>=12.4,<13") for d in deps), deps
        assert not any(d.startswith("nvidia-cublas>=") for d in deps), deps
    env = cu12["tool"]["cibuildwheel"]["environment"]
    assert env["CUDA_HOME"] == "/usr/local/cuda-12.8" and env["PATH"].startswith("/usr/local/cuda-12.8/bin")
    assert cu12["tool"]["cibuildwheel"]["before-all"].startswith("CUDA_PKG_VERSION=12-8 ")
    # everything else as committed: the import package, the version, the build settings
    assert cu12["project"]["version"] == base["project"]["version"]
    assert cu12["tool"]["scikit-build"] == base["tool"]["scikit-build"]
    # idempotent, and CUDA 13 is the committed file
    assert wheel_variant.rewrite(wheel_variant.rewrite(text, 12), 12) == wheel_variant.rewrite(text, 12)
    assert wheel_variant.rewrite(text, 13) == text


def test_a_pyproject_without_the_expected_lines_is_refused_by_name(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text('[project]\nname = "baracuda"\n')
    with pytest.raises(SystemExit, match="nvidia-cublas"):
        wheel_variant.main(["--cuda", "12", "--pyproject", str(p)])
    assert p.read_text() == '[project]\nname = "baracuda"\n'  # nothing half-written


def test_check_mode_writes_nothing(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text((ROOT / "pyproject.toml").read_text())
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "wheel_variant.py"), "--cuda", "12", "--check",
                          "--pyproject", str(p)], capture_output=True, text=True, check=True).stdout
    assert 'name = "baracuda-cu12"' in out
    assert p.read_text() == (ROOT / "pyproject.toml").read_text()
