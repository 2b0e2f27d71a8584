"""The core is usable from C++ without Python: build the programs in examples/cpp against the
installed headers and library, run them, check what they print."""
import pathlib
import shutil
import subprocess

import pytest

import baracuda as bc

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "cpp"


def build_demo(name, tmp_path_factory):
    """Compile examples/cpp/<name>.cpp against the installed package (warnings are errors)."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ on PATH")
    exe = tmp_path_factory.mktemp("cpp") / name
    inc, lib = bc.get_include(), bc.get_library_dir()
    cmd = [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{inc}", str(EXAMPLES / f"{name}.cpp"), "-o",
           str(exe), f"-L{lib}", "-lbaracuda", f"-Wl,-rpath,{lib}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"compiling {name}.cpp failed:\n{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    return exe


def run_demo(exe):
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    return r.stdout, r.stdout.splitlines()


def sku_text(k):
    return repr(k)[len("KernelSku("):-1]  # KernelSku::str()


def check_run_section(out, lines, *plans):
    """With a device, every plan ran and matched its float64 reference; without, the run was skipped."""
    if bc.devices():
        for p in plans:
            assert f"{p} run: max rel err" in out, out
        assert "run OK: results match the float64 reference" in out, out
    else:
        assert any(l.startswith("no CUDA device: skipped the run") for l in lines), out


@pytest.fixture(scope="module")
def demo_binary(tmp_path_factory):
    return build_demo("elementwise_demo", tmp_path_factory)


@pytest.fixture(scope="module")
def norm_softmax_binary(tmp_path_factory):
    return build_demo("norm_softmax_demo", tmp_path_factory)


def test_headers_and_library_ship_with_the_package():
    assert (pathlib.Path(bc.get_include()) / "baracuda" / "baracuda.h").is_file()
    assert (pathlib.Path(bc.get_library_dir()) / "libbaracuda.so").is_file()


def test_public_headers_need_no_cuda():
    import re

    for h in (pathlib.Path(bc.get_include()) / "baracuda").glob("*.h"):
        for inc in re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', h.read_text(), re.M):
            assert inc.startswith("baracuda/") or "/" not in inc and not inc.startswith(("cuda", "cu", "nv")), \
                f"{h.name} includes {inc}"


def test_each_public_header_compiles_on_its_own(tmp_path):
    # An embedder includes only the family it uses: every header must bring what it needs.
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ on PATH")
    inc = pathlib.Path(bc.get_include())
    headers = sorted((inc / "baracuda").glob("*.h"))
    assert len(headers) >= 10, headers
    for h in headers:
        src = tmp_path / f"only_{h.stem}.cpp"
        src.write_text(f"#include <baracuda/{h.name}>\nint main() {{ return 0; }}\n")
        cmd = [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{inc}", str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"baracuda/{h.name} does not compile on its own:\n{r.stdout}{r.stderr}"


def test_cpp_demo_runs(demo_binary):
    out, lines = run_demo(demo_binary)
    # The C++ program must report the same SKUs as Python's select() for the same descriptors.
    f32 = bc.float32
    shape, row = (257, 1031), (1031,)
    silu = bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        "silu", [bc.TensorSpec(shape, f32)], bc.TensorSpec(shape, f32)))
    add = bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        "add", [bc.TensorSpec(shape, f32), bc.TensorSpec(row, f32)], bc.TensorSpec(shape, f32), {"alpha": 0.5}))
    assert silu.sku.name == "ew.unary.contiguous"
    assert add.sku.name.startswith("ew.binary.")
    assert f"silu plan: {sku_text(silu.sku)}" in lines, out
    assert f"add plan: {sku_text(add.sku)}" in lines, out
    assert any(l.startswith("refused: InvalidDType: silu: x is int32; supported:") for l in lines), out
    check_run_section(out, lines, "silu", "add")


def test_cpp_norm_softmax_demo_runs(norm_softmax_binary):
    out, lines = run_demo(norm_softmax_binary)
    # The same SKUs as Python's select() for the same descriptors.
    x = bc.TensorSpec((37, 4096), bc.float32)
    norm = bc.NormPlan.select(bc.NormDescriptor("rms_norm", x, weight=bc.float32, residual=True, eps=1e-6))
    softmax = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("softmax", [x], -1, x))
    assert f"rms_norm plan: {sku_text(norm.sku)}" in lines, out
    assert f"softmax plan: {sku_text(softmax.sku)}" in lines, out
    assert any(l.startswith("refused: InvalidArgument: softmax: axis 2 is out of range") for l in lines), out
    assert any(l.startswith("refused: InvalidArgument: rms_norm: bias is given") for l in lines), out
    check_run_section(out, lines, "rms_norm", "softmax")


def test_find_package_builds_and_runs_the_demo(tmp_path):
    """find_package(baracuda CONFIG) against the installed package gives baracuda::baracuda; the
    demo built through it runs (the same checks as the g++ build above)."""
    cmake = shutil.which("cmake")
    if cmake is None or shutil.which("g++") is None:
        pytest.skip("no cmake / g++ on PATH")
    cmake_dir = pathlib.Path(bc.get_cmake_dir())
    assert (cmake_dir / "baracudaConfig.cmake").is_file() and (cmake_dir / "baracudaConfigVersion.cmake").is_file()
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.18)
project(embed CXX)
find_package(baracuda {bc.__version__} CONFIG REQUIRED)
add_executable(demo "{(EXAMPLES / 'elementwise_demo.cpp').as_posix()}")
target_link_libraries(demo PRIVATE baracuda::baracuda)
""")
    build = tmp_path / "build"
    for cmd in ([cmake, "-S", str(src), "-B", str(build), f"-Dbaracuda_DIR={cmake_dir}", "-DCMAKE_CXX_COMPILER=g++"],
                [cmake, "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}"
    out, lines = run_demo(build / "demo")
    check_run_section(out, lines, "silu", "add")
