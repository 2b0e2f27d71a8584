"""Reads `ncu --csv --metrics gpu__time_duration.sum,smsp__cycles_elapsed.avg.per_second` output on
stdin (one pair per profiled launch) and prints their medians as "<us> <GHz>"; "nan nan" when they
are absent or in a unit it does not know (named on stderr). For tools/ncu_clock.sh."""
import csv
import statistics
import sys

TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
FREQ_GHZ = {"hz": 1e-9, "khz": 1e-6, "mhz": 1e-3, "ghz": 1.0, "cycle/ns": 1.0, "cycle/nsecond": 1.0,
            "cycle/us": 1e-3, "cycle/usecond": 1e-3, "cycle/s": 1e-9, "cycle/second": 1e-9}


def main() -> None:
    rows = list(csv.reader(line for line in sys.stdin if line.startswith('"')))
    if not rows:
        print("nan nan")
        return
    head = rows[0]
    name, value, unit = head.index("Metric Name"), head.index("Metric Value"), head.index("Metric Unit")

    def values(metric, scales):
        out = []
        for r in rows[1:]:
            if r[name] != metric:
                continue
            scale = scales.get(r[unit].lower())
            if scale is None:
                print(f"ncu_csv_median: unit {r[unit]!r} of {metric} unknown", file=sys.stderr)
                return []
            out.append(float(r[value].replace(",", "")) * scale)
        return out

    t = values("gpu__time_duration.sum", TIME_US)
    f = values("smsp__cycles_elapsed.avg.per_second", FREQ_GHZ)
    print(f"{statistics.median(t):.1f} {statistics.median(f):.2f}" if t and f else "nan nan")


if __name__ == "__main__":
    main()
