#!/usr/bin/env python3
"""Refresh the result tables in docs/benchmarks.md from a benchmark run's outputs.

    python3 tools/update_bench_doc.py DIR            # DIR holds bench_<family>.md (or .txt)

Each table in docs/benchmarks.md sits between `<!-- bench:<family> -->` and
`<!-- /bench:<family> -->`; this replaces what is between them with DIR/bench_<family>.md
(written by every bench script through bench/common.py; a .txt table is converted when the
.md is missing). The prose around the tables (device, date, command, targets met or not) is
yours to update by hand: numbers change, conclusions have to be re-read.
"""
from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"


def text_table_to_md(text: str) -> str:
    """The first fixed-width table of a bench_<family>.txt (a header line, then a line of dashes)."""
    lines = text.splitlines()
    for i in range(len(lines) - 1):
        if re.match(r"^-+(\s+-+)+\s*$", lines[i + 1]):
            spans = [m.start() for m in re.finditer(r"-+", lines[i + 1])]

            def cells(line: str) -> list[str]:
                ends = spans[1:] + [len(line)]
                return [line[a:b].strip().replace("|", "\\|") for a, b in zip(spans, ends)]

            out = ["| " + " | ".join(cells(lines[i])) + " |", "|" + "|".join("---" for _ in spans) + "|"]
            for line in lines[i + 2:]:
                if not line.strip():
                    break
                out.append("| " + " | ".join(cells(line)) + " |")
            return "\n".join(out)
    raise ValueError("no table found")


def table_for(results: pathlib.Path, family: str) -> str | None:
    md, txt = results / f"bench_{family}.md", results / f"bench_{family}.txt"
    if md.exists():
        # the file's own title ("# bench_<family>") would be a page title inside the doc's section
        return re.sub(rf"\A# bench_{family}\s*\n", "", md.read_text().strip()).strip()
    if txt.exists():
        return text_table_to_md(txt.read_text())
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    results = pathlib.Path(argv[0])
    doc = DOC.read_text()
    for family in re.findall(r"<!-- bench:(\w+) -->", doc):
        table = table_for(results, family)
        if table is None:
            print(f"{family}: no bench_{family}.md / .txt in {results}; left as it was")
            continue
        doc = re.sub(rf"(<!-- bench:{family} -->\n)(?:.*?\n)?(<!-- /bench:{family} -->)",
                     lambda m: m.group(1) + table + "\n" + m.group(2), doc, flags=re.S)
        print(f"{family}: updated")
    DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
