"""The slowest translation units of the last build, from ninja's log, so compile-time growth is seen
when it happens (.ci/run prints them after the install); then the CPU time by family and the build's
span with its tail (the end of the build that ran under half the peak jobs).

    python tools/slowest_tus.py [--top 10] [build dir or .ninja_log ...]   (default: build/*/.ninja_log)
    python tools/slowest_tus.py --write-order cmake/slow_units.cmake DEVICE_NINJA_LOG

--write-order writes the units that took --min-seconds or more, slowest first, as the CMake list
CMakeLists.txt builds first (regenerate it from a clean 16-core device build's log when units move).
"""
import argparse
import glob
import os
import sys


def intervals(path):
    """{target: (start s, end s)} of each output in the log; a target rebuilt keeps its last run."""
    last = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            last[parts[3]] = (int(parts[0]) / 1000.0, int(parts[1]) / 1000.0)
    return last


def entries(path):
    """(seconds, target) of each output in the log's newest build, slowest first."""
    return sorted(((e - s, t) for t, (s, e) in intervals(path).items()), reverse=True)


def family(target):
    """cuda/<family> or cpp/<dir> of an object file's source, else the target's own name (a link)."""
    parts = target.split("/")
    for root in ("cuda", "cpp"):
        if root in parts[:-1]:
            return root + "/" + parts[parts.index(root) + 1]
    return os.path.basename(target)


def tail(spans):
    """(span, peak jobs, tail seconds, units running in the tail): the tail is the end of the build
    during which fewer than half the peak number of jobs ran (a clean build's critical path shows
    there as one or two long units started late)."""
    events = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    running, peak = 0, 0
    for t, d in events:
        running += d
        peak = max(peak, running)
    end = max(e for _, e in spans.values())
    start = min(s for s, _ in spans.values())
    running, t_half = 0, start
    for t, d in events:
        before, running = running, running + d
        if before * 2 >= peak > running * 2:
            t_half = t  # the jobs fell under half the peak here (the last such fall starts the tail)
    late = sorted((e - s, n) for n, (s, e) in spans.items() if e > t_half)
    return end - start, peak, end - t_half, [n for _, n in reversed(late)][:3]


def source_of(target):
    """The source path (relative to the project) an object file was compiled from, else None."""
    if not target.endswith(".o") or ".dir/" not in target:
        return None
    return target.split(".dir/", 1)[1][:-2]


def slow_units_cmake(rows, min_seconds):
    """cmake/slow_units.cmake's text: the compile units of `rows` that took min_seconds or more."""
    units = [(sec, source_of(t)) for sec, t in rows if source_of(t) and sec >= min_seconds]
    lines = [
        "# Written by tools/slowest_tus.py --write-order from a clean 16-core device build's ninja log:",
        f"# the units that took {min_seconds:g} s or more, slowest first. CMakeLists.txt lists them first in",
        "# their targets, so ninja starts them first and the build does not end on one started late.",
        "set(BARACUDA_SLOW_UNITS",
    ] + [f"  {u}" for _, u in units] + [")", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--write-order", metavar="FILE", help="write the slow units, slowest first, as a CMake list")
    ap.add_argument("--min-seconds", type=float, default=25.0, help="--write-order: the units at least this slow")
    args = ap.parse_args()
    paths = args.paths or glob.glob("build/*/.ninja_log")
    logs = [os.path.join(p, ".ninja_log") if os.path.isdir(p) else p for p in paths]
    logs = [p for p in logs if os.path.isfile(p)]
    if not logs:
        print("slowest_tus: no .ninja_log found (nothing built here yet?)")
        return 0
    if args.write_order:
        with open(args.write_order, "w", encoding="utf-8") as f:
            f.write(slow_units_cmake(entries(logs[0]), args.min_seconds))
        print(f"slowest_tus: wrote {args.write_order} from {logs[0]}")
        return 0
    for log in logs:
        rows = entries(log)
        total = sum(s for s, _ in rows)
        print(f"{log}: {len(rows)} outputs, {total / 60:.1f} CPU-minutes of compile and link in all; slowest:")
        for s, t in rows[:args.top]:
            print(f"  {s:8.1f} s  {t}")
        if not rows:
            continue
        by = {}
        for sec, t in rows:
            by[family(t)] = by.get(family(t), 0.0) + sec
        top = sorted(by.items(), key=lambda kv: -kv[1])[:6]
        print("  by family: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in top))
        span, peak, tail_s, late = tail(intervals(log))
        print(f"  span {span:.1f} s at up to {peak} jobs; the last {tail_s:.1f} s ran under half of them"
              + (f" (the longest then: {', '.join(os.path.basename(n) for n in late)})" if late else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
