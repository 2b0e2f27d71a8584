#!/usr/bin/env python3
"""Keeps a warm device machine's build incremental. Each device call copies the working tree afresh,
so every source file is newer than the objects the last call built in build/ (kept between calls)
and ninja would rebuild everything. After a build, `save` records each source file's content hash
and mtime; before the next one, `restore` gives every file whose content is unchanged its recorded
mtime back, so ninja rebuilds only what changed (and what includes it).

    python3 tools/source_mtimes.py save build/.source_mtimes
    python3 tools/source_mtimes.py restore build/.source_mtimes   # prints how many it restored
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".git", "build", ".whl", "shared", "__pycache__", ".pytest_cache", "dist", ".venv", ".ci-venv"}


def sources():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for f in files:
            yield os.path.relpath(os.path.join(top, f), ROOT)


def digest(path):
    with open(os.path.join(ROOT, path), "rb") as fh:
        return hashlib.sha1(fh.read()).hexdigest()


def main(argv):
    if len(argv) != 3 or argv[1] not in ("save", "restore"):
        sys.exit(__doc__)
    manifest = os.path.join(ROOT, argv[2])
    if argv[1] == "save":
        state = {p: [digest(p), os.stat(os.path.join(ROOT, p)).st_mtime_ns] for p in sources()}
        os.makedirs(os.path.dirname(manifest), exist_ok=True)
        with open(manifest, "w") as fh:
            json.dump(state, fh)
        return 0
    if not os.path.exists(manifest):
        print("source_mtimes: no manifest (a fresh machine): a full build")
        return 0
    with open(manifest) as fh:
        state = json.load(fh)
    restored = changed = 0
    for p in sources():
        entry = state.get(p)
        if entry is None or digest(p) != entry[0]:
            changed += 1
            continue
        os.utime(os.path.join(ROOT, p), ns=(entry[1], entry[1]))
        restored += 1
    print(f"source_mtimes: {restored} unchanged files get the last build's mtimes back, {changed} new or changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
