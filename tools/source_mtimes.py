#!/usr/bin/env python3
"""Keeps a warm device machine's build incremental. Each device call copies the working tree afresh,
so every source file is newer than the objects the last call built in build/ (kept between calls)
and ninja would rebuild everything. After a build, `save` records each source file's content hash
and mtime; before the next one, `restore` gives every file whose content is unchanged its recorded
mtime back, so ninja rebuilds only what changed (and what includes it).

    python3 tools/source_mtimes.py save build/.source_mtimes
    python3 tools/source_mtimes.py restore build/.source_mtimes   # prints how many it restored

The manifest path is relative to the repository root (or to --root DIR, for the tests).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".git", "build", ".whl", "shared", "__pycache__", ".pytest_cache", "dist", ".venv", ".ci-venv"}


def sources(root):
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for f in files:
            yield os.path.relpath(os.path.join(top, f), root)


def digest(root, path):
    with open(os.path.join(root, path), "rb") as fh:
        return hashlib.sha1(fh.read()).hexdigest()


def save(root, manifest):
    state = {p: [digest(root, p), os.stat(os.path.join(root, p)).st_mtime_ns] for p in sources(root)}
    os.makedirs(os.path.dirname(manifest), exist_ok=True)
    with open(manifest, "w") as fh:
        json.dump(state, fh)


def restore(root, manifest):
    """Gives unchanged files their recorded mtime back; returns (restored, new or changed), or None
    without a manifest."""
    if not os.path.exists(manifest):
        return None
    with open(manifest) as fh:
        state = json.load(fh)
    restored = changed = 0
    for p in sources(root):
        entry = state.get(p)
        if entry is None or digest(root, p) != entry[0]:
            changed += 1
            continue
        os.utime(os.path.join(root, p), ns=(entry[1], entry[1]))
        restored += 1
    return restored, changed


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("save", "restore"))
    ap.add_argument("manifest", help="relative to the root")
    ap.add_argument("--root", default=ROOT, help="the tree (default: this repository)")
    args = ap.parse_args(argv[1:])
    root = os.path.abspath(args.root)
    manifest = os.path.join(root, args.manifest)
    if args.action == "save":
        save(root, manifest)
        return 0
    counts = restore(root, manifest)
    if counts is None:
        print("source_mtimes: no manifest (a fresh machine): a full build")
    else:
        print(f"source_mtimes: {counts[0]} unchanged files get the last build's mtimes back, "
              f"{counts[1]} new or changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
