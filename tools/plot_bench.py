#!/usr/bin/env python3
"""Charts of the benchmark JSON files as SVG (no plotting library needed; GitHub renders SVG in
markdown): one chart per bench/bench_<family>.py output, rows as horizontal bars.

    python3 tools/plot_bench.py $OUT            # every $OUT/bench_*.json -> docs/img/bench_*.svg
    python3 tools/plot_bench.py $OUT --out DIR  # elsewhere

A row with ours / torch fractions of the copy bandwidth (the bandwidth benches) gets both bars,
ours and torch, as % of copy; every row with a speedup gets a bar of it beside, with the 1.0x line.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from html import escape

ROW_H, LABEL_W, PANEL_W, GAP, TOP = 18, 330, 260, 40, 46
OURS, TORCH, SPEED = "#1f77b4", "#bbbbbb", "#2ca02c"


def _num(v):
    return v if isinstance(v, (int, float)) and v == v else None


def chart(title: str, rows: list) -> str:
    """The SVG text for `rows` (dicts with key and any of ours_copy_frac, torch_copy_frac, speedup)."""
    rows = [r for r in rows if not r.get("error")]
    has_frac = any(_num(r.get("ours_copy_frac")) is not None for r in rows)
    has_speed = any(_num(r.get("speedup")) is not None for r in rows)
    panels = int(has_frac) + int(has_speed)
    width = LABEL_W + panels * (PANEL_W + GAP) + 20
    height = TOP + max(1, len(rows)) * ROW_H * (2 if has_frac else 1) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">{escape(title)}</text>']
    x0 = LABEL_W
    max_speed = max([_num(r.get("speedup")) or 0 for r in rows] + [1.0]) * 1.1

    def bar(x, y, w, color, label):
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{ROW_H * 0.8:.1f}" '
                   f'fill="{color}"/>')
        out.append(f'<text x="{x + max(w, 0.5) + 3:.1f}" y="{y + ROW_H * 0.65:.1f}">{escape(label)}</text>')

    panel_x = {}
    if has_frac:
        panel_x["frac"] = x0
        out.append(f'<text x="{x0}" y="{TOP - 10}">% of copy bandwidth (ours blue, torch grey)</text>')
        x0 += PANEL_W + GAP
    if has_speed:
        panel_x["speed"] = x0
        out.append(f'<text x="{x0}" y="{TOP - 10}">speedup over torch</text>')
        one = x0 + PANEL_W * (1.0 / max_speed)
        out.append(f'<line x1="{one:.1f}" y1="{TOP - 4}" x2="{one:.1f}" y2="{height - 24}" stroke="#d62728" '
                   f'stroke-dasharray="3,3"/>')
    step = ROW_H * (2 if has_frac else 1)
    for i, r in enumerate(rows):
        y = TOP + i * step
        out.append(f'<text x="{LABEL_W - 6}" y="{y + ROW_H * 0.65:.1f}" text-anchor="end">'
                   f'{escape(str(r.get("key", "?")))[:60]}</text>')
        if has_frac:
            for j, (field, color) in enumerate((("ours_copy_frac", OURS), ("torch_copy_frac", TORCH))):
                v = _num(r.get(field))
                if v is not None:
                    bar(panel_x["frac"], y + j * ROW_H, PANEL_W * min(v, 1.2) / 1.2, color, f"{100 * v:.0f}%")
        v = _num(r.get("speedup"))
        if has_speed and v is not None:
            bar(panel_x["speed"], y, PANEL_W * v / max_speed, SPEED, f"{v:.2f}x")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("src", help="a folder of bench_*.json files (the benches' $OUT)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "img"))
    args = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(args.src, "bench_*.json")))
    if not files:
        print(f"no bench_*.json in {args.src}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    for path in files:
        with open(path) as f:
            data = json.load(f)
        stem = os.path.splitext(os.path.basename(path))[0]
        dev = (data.get("device") or {}).get("name", "")
        svg = chart(f"{stem} ({dev})" if dev else stem, data.get("rows") or [])
        dst = os.path.join(args.out, stem + ".svg")
        with open(dst, "w") as f:
            f.write(svg)
        print(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
