"""tools/update_bench_doc.py: a bench run's table replaces what sits between its family's markers in
docs/benchmarks.md, without the bench file's own title, and leaves the other families and the prose
alone (no GPU)."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import update_bench_doc  # noqa: E402

DOC = """# Benchmarks

Prose before.

<!-- bench:attention -->
old attention table
<!-- /bench:attention -->

<!-- bench:gemm -->
old gemm table
<!-- /bench:gemm -->
Prose after.
"""


def test_table_replaced_title_dropped_rest_kept(tmp_path, monkeypatch):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    monkeypatch.setattr(update_bench_doc, "DOC", doc)
    results = tmp_path / "run"
    results.mkdir()
    (results / "bench_attention.md").write_text("# bench_attention\n\nGPU: X\n\n| row | a |\n|---|---|\n| r | 1 |\n")
    assert update_bench_doc.main([str(results)]) == 0
    text = doc.read_text()
    assert "<!-- bench:attention -->\nGPU: X\n\n| row | a |\n|---|---|\n| r | 1 |\n<!-- /bench:attention -->" in text
    assert "# bench_attention" not in text and "old attention table" not in text
    assert "old gemm table" in text and "Prose before." in text and "Prose after." in text


def test_a_text_table_is_converted(tmp_path, monkeypatch):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    monkeypatch.setattr(update_bench_doc, "DOC", doc)
    (tmp_path / "bench_gemm.txt").write_text("GPU: X\n\nrow    ours\n-----  ----\nd/8    790\n")
    assert update_bench_doc.main([str(tmp_path)]) == 0
    text = doc.read_text()
    assert "| row | ours |" in text and "| d/8 | 790 |" in text and "old gemm table" not in text
    assert "old attention table" in text
