#!/usr/bin/env python3
"""Rewrite pyproject.toml for the CUDA 12 wheel: distribution `baracuda-cu12` (the import name stays
`baracuda`), cuBLAS from `nvidia-cublas-cu12` at build and run time, cibuildwheel on a 12.8 toolkit.

pip cannot choose a dependency by the toolkit a wheel was built with, and a project's name cannot be
dynamic (PEP 621), so the CUDA 12 wheel is a second distribution, as CuPy's `cupy-cuda12x` is. Run it
on a fresh checkout before building (it edits the file in place and says what it changed):

    python tools/wheel_variant.py --cuda 12 && python -m cibuildwheel --platform linux
    python tools/wheel_variant.py --cuda 12 --check    # prints the rewritten file, writes nothing

`--cuda 13` is the file as committed (nothing to do). docs/build.md, "CUDA 12".
"""
from __future__ import annotations

import argparse
import pathlib
import sys

# (what the committed file says, what the CUDA 12 wheel needs); each must occur in the file.
CUDA12 = [
    ('name = "baracuda"', 'name = "baracuda-cu12"'),
    ("\"nvidia-cublas>=13,<14; sys_platform == 'linux'\"", "\"nvidia-cublas-cu12>=12.4,<13; sys_platform == 'linux'\""),
    ('CUDA_HOME = "/usr/local/cuda-13.0", PATH = "/usr/local/cuda-13.0/bin:$PATH"',
     'CUDA_HOME = "/usr/local/cuda-12.8", PATH = "/usr/local/cuda-12.8/bin:$PATH"'),
    ('before-all = "bash tools/wheel_cuda_toolkit.sh', 'before-all = "CUDA_PKG_VERSION=12-8 bash tools/wheel_cuda_toolkit.sh'),
]


def rewrite(text: str, cuda: int) -> str:
    if cuda == 13:
        return text
    for old, new in CUDA12:
        if new in text and old not in text:
            continue  # already rewritten
        if old not in text:
            raise SystemExit(f"wheel_variant: pyproject.toml has no {old!r}: update tools/wheel_variant.py with it")
        text = text.replace(old, new)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", type=int, choices=(12, 13), required=True, help="the CUDA major the wheel is built for")
    ap.add_argument("--pyproject", default=str(pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"))
    ap.add_argument("--check", action="store_true", help="print the rewritten file instead of writing it")
    args = ap.parse_args(argv)
    path = pathlib.Path(args.pyproject)
    text = path.read_text()
    out = rewrite(text, args.cuda)
    if args.check:
        sys.stdout.write(out)
    elif out != text:
        path.write_text(out)
        print(f"wheel_variant: {path} now builds the CUDA {args.cuda} wheel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
