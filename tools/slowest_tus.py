"""The slowest translation units of the last build, from ninja's log, so compile-time growth is seen
when it happens (.ci/run prints them after the install).

    python tools/slowest_tus.py [--top 10] [build dir or .ninja_log ...]   (default: build/*/.ninja_log)
"""
import argparse
import glob
import os
import sys


def entries(path):
    """(seconds, target) of each output in the log's newest build; a target rebuilt keeps its last time."""
    last = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            start, end, target = int(parts[0]), int(parts[1]), parts[3]
            last[target] = (end - start) / 1000.0
    return sorted(((s, t) for t, s in last.items()), reverse=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    paths = args.paths or glob.glob("build/*/.ninja_log")
    logs = [os.path.join(p, ".ninja_log") if os.path.isdir(p) else p for p in paths]
    logs = [p for p in logs if os.path.isfile(p)]
    if not logs:
        print("slowest_tus: no .ninja_log found (nothing built here yet?)")
        return 0
    for log in logs:
        rows = entries(log)
        total = sum(s for s, _ in rows)
        print(f"{log}: {len(rows)} outputs, {total / 60:.1f} CPU-minutes of compile and link in all; slowest:")
        for s, t in rows[:args.top]:
            print(f"  {s:8.1f} s  {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
