"""tools/source_mtimes.py: a re-copied tree gets the last build's mtimes back where its files are
unchanged, and keeps the new ones where they changed (no GPU, no build)."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import source_mtimes  # noqa: E402


def _write(root, rel, text, mtime_ns):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    os.utime(p, ns=(mtime_ns, mtime_ns))
    return p


def test_unchanged_files_get_their_mtime_back_changed_ones_keep_theirs(tmp_path):
    old, copied = 1_000_000_000_000_000_000, 2_000_000_000_000_000_000
    same = _write(tmp_path, "cuda/a.cuh", "a", old)
    edited = _write(tmp_path, "cuda/b.cu", "b", old)
    _write(tmp_path, "build/x/obj.o", "object", old)  # build outputs are not sources
    source_mtimes.save(str(tmp_path), str(tmp_path / "build/.source_mtimes"))
    # the next call's copy: every file newer, one edited, one new
    same_p = _write(tmp_path, "cuda/a.cuh", "a", copied)
    edited_p = _write(tmp_path, "cuda/b.cu", "b edited", copied)
    new_p = _write(tmp_path, "cuda/c.cu", "c", copied)
    assert source_mtimes.restore(str(tmp_path), str(tmp_path / "build/.source_mtimes")) == (1, 2)
    assert same_p.stat().st_mtime_ns == old and same == same_p
    assert edited_p.stat().st_mtime_ns == copied and edited == edited_p
    assert new_p.stat().st_mtime_ns == copied


def test_no_manifest_means_a_full_build(tmp_path, capsys):
    assert source_mtimes.restore(str(tmp_path), str(tmp_path / "build/.source_mtimes")) is None
    assert source_mtimes.main(["source_mtimes.py", "restore", "build/.source_mtimes", "--root", str(tmp_path)]) == 0
    assert "no manifest" in capsys.readouterr().out
