#!/usr/bin/env python3
"""Where a kernel's instructions go, without a GPU: compiles a .cu file for one arch (as
codegen_same.py does), and for each kernel whose name matches prints its SASS size and its loops (a
backward branch and the span it closes; the --top largest, in address order, nested ones indented)
with the instructions that usually say what a loop is for (tensor-core MMAs, async and plain global
copies, shared-memory loads, barriers, atomics, MUFU exps and reciprocals). A loop's share of the
instructions issued per iteration is what a ptxas register count does not show: session 51 found
paged decode's copy loop at 474 of a tile's instructions this way (docs/benchmark-notes.md).

    python3 tools/sass_loops.py cuda/paged_attention/paged_decode.cu --kernel 'bfloat16S3_Li128ELi2ELb0ELi64E'
    python3 tools/sass_loops.py cuda/fa2/flash_fwd_bf16.cu --arch 80 --kernel flash_fwd_kernel --top 3

--kernel is a regular expression over the mangled name (anonymous namespaces normalised to ANON).
Loops are static spans: a branch inside one (a general score path, say) counts whether it runs or
not. cuobjdump and CODEGEN_SAME_FLAGS as for codegen_same.py.
"""
import argparse
import collections
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
# Opcodes worth counting in a loop, in the order printed.
CLASSES = ("HMMA", "HGMMA", "LDGSTS", "LDSM", "LDS", "STS", "LDG", "STG", "RED", "ATOM", "BAR", "MUFU", "SHFL")


def codegen_same():
    spec = importlib.util.spec_from_file_location("codegen_same", os.path.join(ROOT, "tools", "codegen_same.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_functions(text):
    """{kernel name: [(address, instruction text)]} from `cuobjdump -sass` output."""
    out, name = {}, None
    for line in text.split("\n"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = INSTRUCTION.match(line)
        if name and m:
            out[name].append((int(m.group(1), 16), m.group(2)))
    return out


def opcode(text):
    """The opcode of one instruction, its guard predicate (@P0, @!PT) dropped."""
    parts = text.split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    return parts[0] if parts else ""


def loops(instructions):
    """Each backward branch's span: (first index, last index, size), outermost (largest) first."""
    at = {a: i for i, (a, _) in enumerate(instructions)}
    found = []
    for i, (a, text) in enumerate(instructions):
        m = BRANCH.search(text)
        if m:
            target = int(m.group(1), 16)
            if target <= a and target in at:
                found.append((at[target], i, i - at[target] + 1))
    return sorted(found, key=lambda s: (-s[2], s[0]))


def classes(instructions):
    """Counts of CLASSES among `instructions`, by opcode name without its modifiers (LDS.128 is LDS)."""
    counts = collections.Counter(opcode(text).split(".")[0] for _, text in instructions)
    return [(c, counts[c]) for c in CLASSES if counts[c]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="a .cu file, relative to the repository root")
    ap.add_argument("--arch", default="90", help="compute capability (default 90)")
    ap.add_argument("--kernel", default="", help="regular expression over the (normalised) mangled name")
    ap.add_argument("--top", type=int, default=8, help="the largest loops shown per kernel (default 8)")
    a = ap.parse_args()
    cg = codegen_same()
    nvcc = cg.find_nvcc()
    cuobjdump = cg.find_cuobjdump(nvcc) or sys.exit("sass_loops: no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "unit.cubin")
        cg.compile_to(nvcc, ROOT, a.file, a.arch, cubin, True)
        text = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    pattern = re.compile(a.kernel)
    shown = 0
    for name, instructions in parse_functions(text).items():
        key = cg.ANON.sub("ANON", name)
        if not pattern.search(key):
            continue
        shown += 1
        print(f"{cg.demangle([name])[0]}: {len(instructions)} instructions")
        chosen = sorted(loops(instructions)[: a.top], key=lambda s: (s[0], -s[2]))
        for first, last, size in chosen:
            depth = sum(f <= first and last <= l and (f, l) != (first, last) for f, l, _ in chosen)
            what = ", ".join(f"{c} {n}" for c, n in classes(instructions[first:last + 1]))
            print(f"  {'  ' * depth}loop {instructions[first][0]:#06x}..{instructions[last][0]:#06x}: "
                  f"{size} instructions ({what})")
    if not shown:
        sys.exit(f"sass_loops: no kernel of {a.file} matches '{a.kernel}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
