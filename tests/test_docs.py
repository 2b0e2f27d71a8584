"""docs/ops.md is generated from the registry; it must match what the built module reports."""
import difflib
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("gen_ops_doc", ROOT / "tools" / "gen_ops_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ops_doc_up_to_date():
    want = _generator().render()
    got = (ROOT / "docs" / "ops.md").read_text(encoding="utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(got.splitlines(True), want.splitlines(True), "docs/ops.md",
                                            "generated", n=1))
        pytest.fail("docs/ops.md is out of date: run python tools/gen_ops_doc.py\n" + diff[:6000])


def test_ops_doc_lists_every_forward_op():
    import baracuda as bc

    text = (ROOT / "docs" / "ops.md").read_text(encoding="utf-8")
    for fam in bc.families():
        for op in fam["ops"]:
            assert f"| `{op['op']}` |" in text, op["op"]
    for row in bc.elementwise_ops():
        assert f"`{row['name']}`" in text, row["name"]
