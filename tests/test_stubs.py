"""The committed stubs match the built module (regenerate with tools/gen_stubs.sh)."""
import difflib
import importlib.metadata
import pathlib
import subprocess
import sys

import pytest

import baracuda

ROOT = pathlib.Path(__file__).resolve().parent.parent
STUB = ROOT / "stubs" / "baracuda" / "_C.pyi"
NANOBIND = "3.1.0"  # stubgen output differs between nanobind versions; pyproject.toml pins this one


def _nanobind_version():
    try:
        return importlib.metadata.version("nanobind")
    except importlib.metadata.PackageNotFoundError:
        return None


def test_stub_matches_built_module(tmp_path):
    have = _nanobind_version()
    if have != NANOBIND:
        pytest.skip(f"stubs are generated with nanobind {NANOBIND}, this environment has {have}; "
                    f"install the test extra (pip install '.[test]') to compare")
    out = tmp_path / "_C.pyi"
    # Run outside the checkout so the installed baracuda is the one imported.
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "baracuda._C", "-o", str(out)],
                   cwd=tmp_path, check=True, timeout=300)
    got, want = out.read_text(), STUB.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            "stubs/baracuda/_C.pyi", "generated", n=2))
        pytest.fail("stubs/baracuda/_C.pyi is out of date with the built module; run tools/gen_stubs.sh\n"
                    + diff[:6000])


def test_installed_package_carries_stub():
    pkg = pathlib.Path(baracuda.__file__).parent
    assert (pkg / "_C.pyi").is_file(), f"{pkg} has no _C.pyi: the wheel should ship it"
    assert (pkg / "_C.pyi").read_text() == STUB.read_text(), "the installed _C.pyi is not stubs/baracuda/_C.pyi"
    assert (pkg / "py.typed").is_file(), f"{pkg} has no py.typed"
    stub = ROOT / "stubs" / "baracuda" / "__init__.pyi"
    assert (pkg / "__init__.pyi").read_text() == stub.read_text(), "the installed __init__.pyi is not the committed one"


def test_package_stub_matches_the_namespace():
    """stubs/baracuda/__init__.pyi (the public namespace, installed next to __init__.py) is what
    tools/gen_package_stub.py renders from the installed package."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_package_stub", ROOT / "tools" / "gen_package_stub.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    got, want = gen.render(), (ROOT / "stubs" / "baracuda" / "__init__.pyi").read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            "stubs/baracuda/__init__.pyi", "generated", n=2))
        pytest.fail("stubs/baracuda/__init__.pyi is out of date; run python tools/gen_package_stub.py\n" + diff[:6000])
    assert set(baracuda.__all__) >= {"rms_norm", "silu", "ElementwisePlan", "bfloat16", "errors"}
