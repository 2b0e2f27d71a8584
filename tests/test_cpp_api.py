"""The core is usable from C++ without Python: build examples/cpp/elementwise_demo.cpp
against the installed headers and library, run it, check what it prints."""
import pathlib
import shutil
import subprocess

import pytest

import baracuda as bc

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "cpp" / "elementwise_demo.cpp"


@pytest.fixture(scope="module")
def demo_binary(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ on PATH")
    exe = tmp_path_factory.mktemp("cpp") / "elementwise_demo"
    inc, lib = bc.get_include(), bc.get_library_dir()
    cmd = [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{inc}", str(DEMO), "-o", str(exe),
           f"-L{lib}", "-lbaracuda", f"-Wl,-rpath,{lib}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"compiling the C++ demo failed:\n{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    return exe


def test_headers_and_library_ship_with_the_package():
    assert (pathlib.Path(bc.get_include()) / "baracuda" / "baracuda.h").is_file()
    assert (pathlib.Path(bc.get_library_dir()) / "libbaracuda.so").is_file()


def test_public_headers_need_no_cuda():
    import re

    for h in (pathlib.Path(bc.get_include()) / "baracuda").glob("*.h"):
        for inc in re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', h.read_text(), re.M):
            assert inc.startswith("baracuda/") or "/" not in inc and not inc.startswith(("cuda", "cu", "nv")), \
                f"{h.name} includes {inc}"


def test_cpp_demo_runs(demo_binary):
    r = subprocess.run([str(demo_binary)], capture_output=True, text=True, timeout=300)
    out = r.stdout
    assert r.returncode == 0, f"exit {r.returncode}\n{out}{r.stderr}"
    lines = out.splitlines()
    # The C++ program must report the same SKUs as Python's select() for the same descriptors.
    f32 = bc.float32
    shape, row = (257, 1031), (1031,)
    silu = bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        "silu", [bc.TensorSpec(shape, f32)], bc.TensorSpec(shape, f32)))
    add = bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        "add", [bc.TensorSpec(shape, f32), bc.TensorSpec(row, f32)], bc.TensorSpec(shape, f32), {"alpha": 0.5}))
    sku_text = lambda k: repr(k)[len("KernelSku("):-1]  # noqa: E731  (KernelSku::str())
    assert silu.sku.name == "ew.unary.contiguous"
    assert add.sku.name.startswith("ew.binary.")
    assert f"silu plan: {sku_text(silu.sku)}" in lines, out
    assert f"add plan: {sku_text(add.sku)}" in lines, out
    assert any(l.startswith("refused: InvalidDType: silu: x is int32; supported:") for l in lines), out
    if bc.devices():
        assert "silu run: max rel err" in out and "add run: max rel err" in out, out
        assert "run OK: results match the float64 reference" in out, out
    else:
        assert any(l.startswith("no CUDA device: skipped the run") for l in lines), out
