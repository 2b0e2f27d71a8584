#!/usr/bin/env python3
"""Whether a build's shared-PTX units (cmake/shared_ptx.cmake: compiled once as the lowest
architecture's PTX, then into every architecture's SASS) run the same machine code as per-architecture
compiles would. For each such unit in the build's compile_commands.json, the highest architecture's
SASS is read from the unit's object file and compared, kernel by kernel, with the same command
compiled from that architecture's own PTX (addresses, encodings and anonymous-namespace names dropped).

    python3 tools/shared_ptx_check.py                       # the newest build/*/ tree
    python3 tools/shared_ptx_check.py --build build/cp312-abi3-linux_x86_64 --jobs 16 --units reduction/

Prints one line per unit (kernels, how many identical, instructions on each side) and then every
kernel that is more than --tolerance percent longer shared, or a fifth shorter (code that only the
higher architecture compiles, lost), or on one side only; exits 1 when there is one.
A unit whose code differs by architecture on purpose belongs in cmake/per_arch_units.cmake.
cuobjdump as for tools/codegen_same.py.
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from codegen_same import demangle, find_cuobjdump, find_nvcc, sass_kernels  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = "-DBARACUDA_SHARED_PTX=1"
LOST = 0.2  # a shared kernel this much smaller than the per-architecture one is flagged too


def reference_command(entry, arch, cubin):
    """The unit's compile command for `arch`'s own PTX and SASS only, writing a cubin."""
    args, out, skip = shlex.split(entry["command"]), [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in ("-o", "-MT", "-MF"):
            skip = 1
        elif a in ("-c", "-MD", SHARED) or a.startswith("--generate-code="):
            continue
        else:
            out.append(a)
    return out + ["-gencode", f"arch=compute_{arch},code=sm_{arch}", "-cubin", "-o", cubin]


def check_unit(entry, arch, cuobjdump, tmp):
    obj = os.path.join(entry["directory"], entry["output"])
    cubin = os.path.join(tmp, re.sub(r"\W", "_", entry["output"]) + ".cubin")
    r = subprocess.run(reference_command(entry, arch, cubin), cwd=entry["directory"], capture_output=True, text=True)
    if r.returncode:
        return entry["file"], None, None, {}, r.stderr[-2000:]
    shown = {}
    return entry["file"], sass_kernels(cuobjdump, cubin, shown), sass_kernels(cuobjdump, obj, shown, arch), shown, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", help="the CMake build tree (default: the newest build/*/ with compile_commands.json)")
    ap.add_argument("--arch", default="90", help="the architecture to compare (default 90)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--units", nargs="*", default=[], help="only units whose path contains one of these")
    ap.add_argument("--tolerance", type=float, default=2.0, help="instructions a shared kernel may add, %%")
    a = ap.parse_args()
    trees = [a.build] if a.build else sorted(glob.glob(os.path.join(ROOT, "build", "*")), key=os.path.getmtime)
    db = next((os.path.join(t, "compile_commands.json") for t in reversed(trees)
               if os.path.exists(os.path.join(t, "compile_commands.json"))), None)
    if not db:
        sys.exit("shared_ptx_check: no compile_commands.json (configure a build first)")
    entries = [e for e in json.load(open(db)) if SHARED in e.get("command", "")
               and (not a.units or any(u in e["file"] for u in a.units))]
    if not entries:
        sys.exit(f"shared_ptx_check: no shared-PTX unit in {db}")
    nvcc = find_nvcc()
    cuobjdump = find_cuobjdump(nvcc) or sys.exit("shared_ptx_check: no cuobjdump")
    size = lambda body: body.count("\n") + 1 if body else 0
    flagged, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp, cf.ThreadPoolExecutor(a.jobs) as pool:
        for f, ref, shared, shown, error in pool.map(lambda e: check_unit(e, a.arch, cuobjdump, tmp), entries):
            unit = os.path.relpath(f, ROOT)
            if ref is None:
                print(f"{unit}: the reference compile failed:\n{error}")
                failed += 1
                continue
            both = set(ref) & set(shared)
            same = sum(ref[k] == shared[k] for k in both)
            nr, ns = sum(map(size, ref.values())), sum(map(size, shared.values()))
            print(f"{unit}: {len(ref)} kernels ({len(shared)} shared), {same} identical; instructions "
                  f"{nr} per-arch, {ns} shared ({(ns - nr) / max(nr, 1) * 100:+.2f}%)", flush=True)
            for k in sorted(set(ref) | set(shared)):
                r, s = size(ref.get(k)), size(shared.get(k))
                # more instructions, or far fewer (a body compiled out on the lower architecture's side)
                if not r or not s or s > r * (1 + a.tolerance / 100) or s < r * (1 - LOST):
                    flagged.append((unit, shown[k], r, s))
    if flagged:
        print(f"\n{len(flagged)} kernels {a.tolerance}% longer or {LOST:.0%} shorter shared, or on one side only:")
        for (unit, _, r, s), name in zip(flagged, demangle([n for _, n, _, _ in flagged])):
            print(f"  {unit}: {r} -> {s} instructions: {name[:160]}")
    print(f"{len(entries)} shared-PTX units checked against sm_{a.arch}'s own PTX; {len(flagged)} kernels flagged, "
          f"{failed} reference compiles failed")
    return 1 if flagged or failed else 0


if __name__ == "__main__":
    sys.exit(main())
