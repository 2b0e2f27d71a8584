"""tools/plot_bench.py turns a bench's JSON into an SVG chart (no plotting library): every row's label
and numbers are in it, error rows are left out, and the files land where asked."""
import importlib.util
import json
import xml.dom.minidom
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("plot_bench", ROOT / "tools" / "plot_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_chart_from_bench_json(tmp_path):
    rows = [dict(key="fwd bf16 n16384", ours_copy_frac=0.91, torch_copy_frac=0.62, speedup=1.47),
            dict(key="bwd <zipf>", speedup=2.31), dict(key="broken", error="boom")]
    (tmp_path / "bench_demo.json").write_text(json.dumps({"device": {"name": "NVIDIA H200"}, "rows": rows}))
    out = tmp_path / "img"
    assert _tool().main([str(tmp_path), "--out", str(out)]) == 0
    svg = (out / "bench_demo.svg").read_text()
    xml.dom.minidom.parseString(svg)  # well-formed
    for needle in ("bench_demo (NVIDIA H200)", "fwd bf16 n16384", "91%", "62%", "1.47x", "bwd &lt;zipf&gt;", "2.31x"):
        assert needle in svg, needle
    assert "broken" not in svg


def test_no_json_is_an_error(tmp_path):
    assert _tool().main([str(tmp_path)]) == 1
