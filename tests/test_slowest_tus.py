"""tools/slowest_tus.py: what it reads from a ninja log (no GPU, no build)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import slowest_tus  # noqa: E402

# start ms, end ms, mtime, target, hash: four units on up to three jobs, then a link alone.
LOG = """# ninja log v5
0\t100000\t0\tCMakeFiles/core.dir/cuda/elementwise/unary_f32.cu.o\tx
0\t30000\t0\tCMakeFiles/core.dir/cuda/rope/rope.cu.o\tx
0\t60000\t0\tCMakeFiles/core.dir/cpp/src/plan.cpp.o\tx
30000\t40000\t0\tCMakeFiles/core.dir/cuda/elementwise/binary_int.cu.o\tx
100000\t112000\t0\tlibbaracuda.so\tx
"""


def _log(tmp_path, text=LOG):
    p = tmp_path / ".ninja_log"
    p.write_text(text)
    return p


def test_slowest_first_and_a_rebuilt_target_keeps_its_last_run(tmp_path):
    text = LOG + "200000\t205000\t0\tCMakeFiles/core.dir/cuda/rope/rope.cu.o\tx\n"
    rows = slowest_tus.entries(_log(tmp_path, text))
    assert [round(s, 1) for s, _ in rows] == [100.0, 60.0, 12.0, 10.0, 5.0]
    assert rows[0][1].endswith("unary_f32.cu.o") and rows[-1][1].endswith("rope.cu.o")


def test_families_and_the_tail_under_half_the_peak_jobs(tmp_path):
    assert slowest_tus.family("CMakeFiles/core.dir/cuda/elementwise/unary_f32.cu.o") == "cuda/elementwise"
    assert slowest_tus.family("CMakeFiles/core.dir/cpp/src/plan.cpp.o") == "cpp/src"
    assert slowest_tus.family("libbaracuda.so") == "libbaracuda.so"
    span, peak, tail_s, late = slowest_tus.tail(slowest_tus.intervals(_log(tmp_path)))
    # three jobs at once at the start; from 60 s only the long unit, then the link, ran (one job)
    assert (span, peak, tail_s) == (112.0, 3, 52.0)
    assert late[0].endswith("unary_f32.cu.o") and "libbaracuda.so" in late


def test_the_printed_report(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "slowest_tus.py"), "--top", "2", str(_log(tmp_path))],
                         capture_output=True, text=True, check=True).stdout
    assert "5 outputs, 3.5 CPU-minutes" in out
    assert "by family: cuda/elementwise 52%, cpp/src 28%, cuda/rope 14%" in out
    assert "span 112.0 s at up to 3 jobs; the last 52.0 s ran under half of them" in out
    empty = subprocess.run([sys.executable, str(ROOT / "tools" / "slowest_tus.py"),
                            str(_log(tmp_path, "# ninja log v5\n"))], capture_output=True, text=True, check=True)
    assert "0 outputs" in empty.stdout and "span" not in empty.stdout


def test_the_slow_units_written_for_cmake(tmp_path):
    out = tmp_path / "slow_units.cmake"
    subprocess.run([sys.executable, str(ROOT / "tools" / "slowest_tus.py"), "--write-order", str(out),
                    "--min-seconds", "30", str(_log(tmp_path))], capture_output=True, text=True, check=True)
    body = out.read_text().split("set(BARACUDA_SLOW_UNITS\n", 1)[1]
    # the compile units of 30 s or more, slowest first, as source paths; links are not units
    assert body == "  cuda/elementwise/unary_f32.cu\n  cpp/src/plan.cpp\n  cuda/rope/rope.cu\n)\n"


def test_the_checked_in_slow_units_are_sources_of_this_tree():
    text = (ROOT / "cmake" / "slow_units.cmake").read_text()
    units = text.split("set(BARACUDA_SLOW_UNITS\n", 1)[1].split(")", 1)[0].split()
    assert len(units) >= 10 and len(set(units)) == len(units)
    missing = [u for u in units if not (ROOT / u).is_file()]
    assert not missing, f"cmake/slow_units.cmake names units this tree lacks (regenerate it): {missing}"
