"""Shared benchmark helpers for every op family (elementwise now; reductions, GEMM later).

The method (docs/benchmarks.md says it in prose):
  * time on the device with CUDA events (torch.cuda.Event), after warm-up;
  * the median of many samples, in interleaved passes (ours, torch, ours, torch) so clock drift
    hits both sides alike; the spread between passes is the noise floor of a comparison;
  * rotate among several buffer sets so the working set between two uses of the same set is
    several times the L2 cache (nothing is timed out of the cache);
  * small launches (tensors of a few MiB) are timed as CUDA-graph replays of a batch of launches,
    so host launch gaps do not hide the kernel (falls back to events around a batch, and says so);
  * bandwidth = (bytes read + bytes written, each operand once) / time, also as a fraction of the
    device-to-device copy bandwidth measured in the same run.

Everything here uses torch only; nothing imports baracuda.
"""
from __future__ import annotations

import gc
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch

MiB = 1 << 20
GiB = 1 << 30


# ---- device facts ----------------------------------------------------------------------------
def device_info(device: int = 0) -> dict:
    p = torch.cuda.get_device_properties(device)
    return {
        "name": p.name,
        "sm": f"{p.major}.{p.minor}",
        "multiprocessors": p.multi_processor_count,
        "total_memory_gib": round(p.total_memory / GiB, 1),
        "l2_bytes": l2_bytes(device),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
    }


def l2_bytes(device: int = 0) -> int:
    """L2 size in bytes (torch exposes it as L2_cache_size); 64 MiB if unknown."""
    v = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return int(v) if v else 64 * MiB


def rotation_sets(set_bytes: int, *, factor: float = 3.0, min_sets: int = 3, max_sets: int = 128) -> int:
    """How many buffer sets to rotate among so that the bytes touched between two uses of one set
    are at least `factor` x L2 (and at least `min_sets` sets)."""
    need = math.ceil(factor * l2_bytes() / max(1, set_bytes))
    return int(min(max_sets, max(min_sets, need)))


def nbytes(t: torch.Tensor) -> int:
    """Logical bytes of a tensor (numel x element size)."""
    return t.numel() * t.element_size()


def free_memory():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


# ---- statistics ------------------------------------------------------------------------------
def quantile(xs, q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Timing:
    """Seconds per launch. `pass_medians` are the medians of each interleaved pass."""
    samples: list = field(default_factory=list)
    pass_medians: list = field(default_factory=list)
    method: str = "events"
    launches_per_sample: int = 1

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def p10(self) -> float:
        return quantile(self.samples, 0.1)

    @property
    def p90(self) -> float:
        return quantile(self.samples, 0.9)

    @property
    def pass_spread(self) -> float:
        """(max - min) / median of the per-pass medians: the run-to-run noise of this version."""
        if len(self.pass_medians) < 2:
            return float("nan")
        return (max(self.pass_medians) - min(self.pass_medians)) / statistics.median(self.pass_medians)

    def to_json(self) -> dict:
        return {
            "median_us": self.median * 1e6,
            "p10_us": self.p10 * 1e6,
            "p90_us": self.p90 * 1e6,
            "min_us": min(self.samples) * 1e6 if self.samples else None,
            "pass_medians_us": [m * 1e6 for m in self.pass_medians],
            "pass_spread": self.pass_spread,
            "samples": len(self.samples),
            "method": self.method,
            "launches_per_sample": self.launches_per_sample,
        }


# ---- timing ----------------------------------------------------------------------------------
class GpuBench:
    """Times `fn(i)` (one launch, or one group of launches, on buffer set i) with CUDA events.

    graph=False: each sample is one event pair around `inner` calls (rotating sets).
    graph=True:  `inner` calls (rotating sets) are captured once into a CUDA graph; each sample is
                 one event pair around one replay. If capture fails, falls back to events and
                 records why in `method`.
    Per-launch time = sample / inner.
    """

    def __init__(self, fn, nsets: int, *, inner: int = 1, graph: bool = False, warmup: int = 5):
        self.fn = fn
        self.nsets = max(1, int(nsets))
        self.inner = max(1, int(inner))
        self.graph = None
        self.method = "events" if self.inner == 1 else f"events x{self.inner}"
        self.k = 0
        for i in range(max(warmup, min(self.nsets, 32))):  # module load, first touch of every set
            fn(i % self.nsets)
        torch.cuda.synchronize()
        if graph:
            try:
                self.graph = self._capture()
                self.method = f"graph x{self.inner}"
            except Exception as e:  # noqa: BLE001  (report, do not die: the fallback is visible)
                self.graph = None
                msg = str(e).strip().splitlines()[0][:80] if str(e).strip() else type(e).__name__
                self.method = f"events x{self.inner} (graph capture failed: {msg})"
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001
                    pass
            if self.graph is not None:
                for _ in range(max(2, warmup // 2)):
                    self.graph.replay()
                torch.cuda.synchronize()
        # One untimed step's duration, for the spin-up before each set of samples.
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        self._step()
        b.record()
        torch.cuda.synchronize()
        self.step_s = max(a.elapsed_time(b) * 1e-3, 1e-6)

    # GPU time run untimed right before each set of samples: after a pause (allocation, a
    # reference computation, a synchronize) the clocks are low, and a set of short samples
    # (30 x 50 us) would otherwise be timed while they ramp up (H100: a 512-column RMSNorm
    # forward measured 82% of copy at the start of a table row, 92% in a sweep).
    SPIN_S = 0.02

    def _step(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            for _ in range(self.inner):
                self.fn(self.k % self.nsets)
                self.k += 1

    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as torch recommends before capture
            for i in range(3):
                self.fn(i % self.nsets)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for k in range(self.inner):
                self.fn(k % self.nsets)
        g.replay()
        torch.cuda.synchronize()
        return g

    def sample(self, iters: int) -> list:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for _ in range(min(1000, math.ceil(self.SPIN_S / self.step_s))):
            self._step()
        for s in range(iters):
            starts[s].record()
            self._step()
            ends[s].record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) * 1e-3 / self.inner for a, b in zip(starts, ends)]


def measure(benches: dict, *, iters: int, passes: int = 2) -> dict:
    """Interleaved passes over several GpuBench objects (same timer for all). Returns name -> Timing."""
    out = {name: Timing(method=b.method, launches_per_sample=b.inner) for name, b in benches.items()}
    for _ in range(max(1, passes)):
        for name, b in benches.items():
            xs = b.sample(iters)
            out[name].samples.extend(xs)
            out[name].pass_medians.append(statistics.median(xs))
    return out


def time_host(calls: dict, *, n: int = 10000, reps: int = 5, warmup: int = 200) -> dict:
    """Host cost of back-to-back calls: perf_counter around `n` calls plus one
    torch.cuda.synchronize() at the end; median over `reps` interleaved repetitions.
    Returns name -> {"us_per_call": median, "reps_us": [...]}. `calls` maps name -> (fn, args, kwargs)."""
    res = {name: [] for name in calls}
    for fn, a, kw in calls.values():
        for _ in range(warmup):
            fn(*a, **kw)
    torch.cuda.synchronize()
    for _ in range(reps):
        for name, (fn, a, kw) in calls.items():
            torch.cuda.synchronize()
            r = range(n)
            t0 = time.perf_counter()
            for _ in r:
                fn(*a, **kw)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            res[name].append((t1 - t0) / n * 1e6)
    return {name: {"us_per_call": statistics.median(v), "reps_us": v} for name, v in res.items()}


def copy_bandwidth(total_bytes: int = 512 * MiB, *, iters: int = 50, passes: int = 2, warmup: int = 5) -> dict:
    """Device-to-device copy bandwidth: torch dst.copy_(src), `total_bytes` per tensor (>= 256 MiB),
    two buffer sets; bytes = read + written = 2 x total_bytes. Returns {"gbs", "timing", "bytes"}."""
    n = total_bytes // 4
    srcs = [torch.randn(n, device="cuda") for _ in range(2)]
    dsts = [torch.empty_like(s) for s in srcs]
    b = GpuBench(lambda i: dsts[i].copy_(srcs[i]), 2, warmup=warmup)
    t = measure({"copy": b}, iters=iters, passes=passes)["copy"]
    srcs = dsts = b = None  # released; the closures above still name them
    free_memory()
    moved = 2 * n * 4
    return {"gbs": moved / t.median / 1e9, "timing": t, "bytes": moved}


def dense_peak_tflops(n: int = 8192, *, iters: int = 10, passes: int = 2) -> float:
    """The measured tensor-core peak that compute-bound rows are a fraction of: torch's bf16 n^3
    matmul (cuBLAS) in this run, two operand sets. TFLOP/s = 2 n^3 / the median time."""
    a = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    b = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    c = [torch.empty(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    g = GpuBench(lambda i: torch.matmul(a[i], b[i], out=c[i]), 2)
    t = measure({"gemm": g}, iters=iters, passes=passes)["gemm"]
    a = b = c = g = None
    free_memory()
    return 2 * n ** 3 / t.median / 1e12


# ---- correctness helpers ---------------------------------------------------------------------
def poison_(t: torch.Tensor):
    """Fill an output with all-ones bytes (NaN for every float dtype, an invalid bool) so that an
    element the kernel did not write shows up in the comparison."""
    try:
        t.view(torch.uint8).fill_(0xFF)
    except Exception:  # noqa: BLE001  (non-contiguous last dim etc.)
        if t.is_floating_point():
            t.fill_(float("nan"))
        else:
            t.fill_(1)


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """||got - ref|| / ||ref|| in float64 (NaN if got has NaN where ref does not). For bool
    outputs: the fraction of bytes that differ (an unwritten poisoned byte counts as wrong)."""
    if got.shape != ref.shape:
        return float("inf")
    if got.dtype == torch.bool or ref.dtype == torch.bool:
        try:  # compare bytes: a poisoned (0xFF) byte is not a valid bool and must count as wrong
            g, r = got.contiguous().view(torch.uint8), ref.contiguous().view(torch.uint8)
        except Exception:  # noqa: BLE001
            g, r = got, ref
        return float((g != r).sum().item()) / max(1, g.numel())
    g = got.float().double() if got.element_size() == 1 else got.double()
    r = ref.float().double() if ref.element_size() == 1 else ref.double()
    num = torch.linalg.vector_norm(g - r).item()
    den = torch.linalg.vector_norm(r).item()
    return num / den if den > 0 else num


# ---- tables and output files -----------------------------------------------------------------
def fmt(x, spec: str = ".1f", empty: str = "-") -> str:
    if x is None:
        return empty
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return empty if math.isnan(x) else "inf"
    return format(x, spec)


def text_table(headers, rows, right=None) -> str:
    """A plain fixed-width table. `right`: set of column indices to right-align (default: every
    column whose cells all look numeric)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    if right is None:
        def numeric(s):
            s = s.rstrip("x%")
            try:
                float(s)
                return True
            except ValueError:
                return s in ("-", "")
        right = {i for i in range(len(headers)) if cells and all(numeric(r[i]) for r in cells)}

    def line(r):
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


def markdown_table(headers, rows) -> str:
    def esc(c):
        return str(c).replace("|", "\\|")

    out = ["| " + " | ".join(esc(h) for h in headers) + " |",
           "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def out_dir():
    """$OUT if set (created), else None."""
    d = os.environ.get("OUT")
    if not d:
        return None
    os.makedirs(d, exist_ok=True)
    return d


def write_outputs(stem: str, markdown: str, data: dict, text: str = None) -> list:
    """Write $OUT/<stem>.md, $OUT/<stem>.json (and $OUT/<stem>.txt, the plain table, when `text` is
    given) when $OUT is set. Returns the paths written."""
    d = out_dir()
    if d is None:
        return []
    md_path = os.path.join(d, stem + ".md")
    js_path = os.path.join(d, stem + ".json")
    paths = [md_path, js_path]
    if text is not None:
        paths.append(os.path.join(d, stem + ".txt"))
        with open(paths[-1], "w") as f:
            f.write(text.rstrip() + "\n")
    with open(md_path, "w") as f:
        f.write(markdown.rstrip() + "\n")
    with open(js_path, "w") as f:
        json.dump(_clean(data), f, indent=1, default=_json_default)
        f.write("\n")
    return paths


def _clean(o):
    """Strict JSON: NaN / inf become null; Timing objects become dicts."""
    if isinstance(o, Timing):
        o = o.to_json()
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    return o


def _json_default(o):
    return str(o)


def parse_bench_args(ap=None, quick=(10, 1), full=(30, 2)):
    """Parses a bench's command line: ``--quick`` (fewer samples: `quick` instead of `full` as
    (iters, passes), set on the result) and ``--rows`` (a regex on the row keys), added to `ap` (a
    new parser by default, else one carrying the bench's own options)."""
    import argparse
    ap = ap or argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer samples, one pass")
    ap.add_argument("--rows", default="", help="a regex on the row keys")
    args = ap.parse_args()
    args.iters, args.passes = quick if args.quick else full
    return args


def bandwidth_row(key: str, sku: str, ok: bool, rel_err: float, tm: dict, moved_bytes: int, copy_gbs: float,
                  **extra) -> dict:
    """One row of report_bandwidth_rows from the timings `tm` of "ours" and "torch": GB/s of
    `moved_bytes`, the fraction of copy, the speedup, the medians in us; `extra` fields added."""
    g = {n: moved_bytes / t.median / 1e9 for n, t in tm.items()}
    return dict(key=key, sku=sku, error="", ok=ok, rel_err=rel_err, ours_gbs=g["ours"],
                ours_copy_frac=g["ours"] / copy_gbs, torch_gbs=g["torch"], torch_copy_frac=g["torch"] / copy_gbs,
                speedup=tm["torch"].median / tm["ours"].median, ours_us=tm["ours"].median * 1e6,
                torch_us=tm["torch"].median * 1e6, timing=tm, **extra)


def report_bandwidth_rows(stem: str, rows: list, *, info: dict, copy_gbs: float, seed, elapsed: float,
                          version: str) -> int:
    """The table of a bandwidth bench (one row per case: ours / torch GB/s, % of copy, speedup,
    check, sku), printed and written as <stem>.md / .json / .txt; returns 3 if a check failed."""
    headers = ["row", "ours GB/s", "ours % copy", "torch GB/s", "torch % copy", "speedup", "check", "sku"]
    table = []
    for r in rows:
        if r["error"]:
            table.append([r["key"], "-", "-", "-", "-", "-", "ERROR", r["error"][:60]])
            continue
        table.append([r["key"], fmt(r["ours_gbs"], ".0f"), fmt(100 * r["ours_copy_frac"], ".1f") + "%",
                      fmt(r["torch_gbs"], ".0f"), fmt(100 * r["torch_copy_frac"], ".1f") + "%",
                      fmt(r["speedup"], ".2f") + "x", "ok" if r["ok"] else "FAILED", r["sku"]])
    head = (f"GPU: {info['name']}; torch {info['torch']}; baracuda {version}\n"
            f"device copy bandwidth: {copy_gbs:.0f} GB/s; {len(rows)} rows in {elapsed:.0f} s\n")
    text = head + "\n" + text_table(headers, table)
    md = f"# {stem}\n\n" + head.replace("\n", "  \n") + "\n" + markdown_table(headers, table)
    write_outputs(stem, md, {"device": info, "copy_gbs": copy_gbs, "seed": seed, "rows": rows}, text)
    print()
    print(text)
    failed = [r["key"] for r in rows if not r.get("ok")]
    if failed:
        print(f"\nFAILED correctness: {failed}", file=sys.stderr)
        return 3
    return 0
