"""The slowest translation units of the last build, from ninja's log, so compile-time growth is seen
when it happens (.ci/run prints them after the install); then the CPU time by family and the build's
span with its tail (the end of the build that ran under half the peak jobs).

    python tools/slowest_tus.py [--top 10] [build dir or .ninja_log ...]   (default: build/*/.ninja_log)
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
