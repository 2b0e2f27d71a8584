#!/usr/bin/env python3
"""Whether a change to device code changes the machine code, without a GPU: compiles a .cu file as it
is in the working tree and as it was at a git revision (default HEAD) for one arch and compares each
kernel's SASS (cuobjdump -sass, addresses and encodings dropped), or its PTX when no cuobjdump is
found (virtual registers and labels renamed in order of appearance, debug lines dropped; PTX can
differ by a register permutation where SASS does not). Names of anonymous namespaces, which differ
per file, are normalised. A refactor that keeps every kernel the same needs no GPU run to show it is
neutral.

    python3 tools/codegen_same.py cuda/paged_attention/paged_decode.cu            # against HEAD
    python3 tools/codegen_same.py cuda/rope/rope.cu --rev main --arch 90 --ptx
    python3 tools/codegen_same.py cuda/scan/cummax.cu cuda/scan/cummin.cu --was cuda/scan/ext.cu

Several files compare the kernels of all of them together; --was names the files at the revision
to compare with when a split or a rename moved the kernels (default: the same paths).

cuobjdump: $CUOBJDUMP, on PATH, next to nvcc, or from `pip install nvidia-cuda-cuobjdump` (the
CPU machine's toolkit has none). Prints one line per kernel that differs (or is only on one side) and
a count; exits 1 when any does. Headers come from the same tree as the file (the working tree, or
the revision's, extracted into a temporary directory). CODEGEN_SAME_FLAGS adds nvcc flags (include
dirs). Each differing kernel shows its size on both sides (SASS instructions, or PTX lines), and the
last lines each side's kernel count, total size and compile time (files one after another, this arch
alone): what a change costs the build.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# An anonymous namespace's per-file name in a mangled symbol (its length prefix differs too), with the
# per-compilation number nvcc may append (`..._cu_<hash>_<n>`, then the next name's length: the digits
# run together, so all of them go; both sides lose the same).
ANON = re.compile(r"\d*_GLOBAL__N__[0-9a-f]+_\d+_\w*?_cu_[0-9a-f]+(?:_\d+)?")


def first_found(cands):
    """The first of `cands` that names an executable (on PATH or as a path), else None."""
    for c in cands:
        if c and subprocess.run(["which", c], capture_output=True).returncode == 0:
            return c
    return None


def find_nvcc():
    return first_found([os.environ.get("NVCC"), "nvcc", "/usr/local/cuda/bin/nvcc"]) or sys.exit("codegen_same: no nvcc")


def find_cuobjdump(nvcc):
    real = os.path.realpath(subprocess.run(["which", nvcc], capture_output=True, text=True).stdout.strip())
    pip = glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia", "cu*", "bin", "cuobjdump"))
    return first_found([os.environ.get("CUOBJDUMP"), "cuobjdump", os.path.join(os.path.dirname(real), "cuobjdump"),
                        "/usr/local/cuda/bin/cuobjdump", *pip])


def compile_to(nvcc, tree, path, arch, out, sass):
    """path (in tree) compiled to a cubin (sass) or to PTX at `out`."""
    inc = [f"-I{tree}/{d}" for d in ("cpp/include", "cuda", "cpp/src")]
    extra = os.environ.get("CODEGEN_SAME_FLAGS", "").split()
    target = ["-gencode", f"arch=compute_{arch},code=sm_{arch}", "-cubin"] if sass else [f"-arch=compute_{arch}", "-ptx"]
    cmd = [nvcc, "-O3", "-std=c++17", "--expt-relaxed-constexpr", "--diag-suppress=177,186", *inc, *extra,
           *target, os.path.join(tree, path), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"codegen_same: compiling {path} in {tree} failed:\n{r.stderr[-3000:]}")


def ptx_kernels(ptx_path, shown):
    """Each kernel's PTX, normalised, by (normalised) name; `shown` maps those names to the original."""
    text = open(ptx_path).read()
    text = "\n".join(l for l in text.split("\n") if not l.strip().startswith((".loc", "//", ".file", ".reg")))
    out = {}
    for part in re.split(r"\n(?=(?:\.visible |\.weak )?\.entry)", text):
        m = re.match(r"(?:\.visible |\.weak )?\.entry\s+(\S+)\(", part)
        if not m:
            continue
        body = ANON.sub("ANON", part)
        names = {}

        def rename(mo):
            return names.setdefault(mo.group(0), f"%{mo.group(1)}#{len(names)}")

        body = re.sub(r"%(rd|r|f|p|rs|fd|h|hh|b|bd)\d+", rename, body)
        body = re.sub(r"\$L__BB\d+_\d+", "L", body)
        key = ANON.sub("ANON", m.group(1))
        out[key] = body
        shown[key] = m.group(1)
    return out


def sass_kernels(cuobjdump, cubin, shown, arch=None):
    """Each kernel's SASS (instructions only), by normalised name: of a cubin, or of an object's or
    library's fatbinary for one `arch` (e.g. "90")."""
    only = ["-arch", f"sm_{arch}"] if arch else []
    text = subprocess.run([cuobjdump, "-sass", *only, cubin], capture_output=True, text=True, check=True).stdout
    out = {}
    for part in re.split(r"\n\s*Function : ", text)[1:]:
        name, _, body = part.partition("\n")
        lines = [re.sub(r"/\*.*?\*/", "", l).strip() for l in body.split("\n")]  # addresses, encodings
        lines = [ANON.sub("ANON", l) for l in lines if l and not l.startswith(".headerflags")]  # names the PTX arch
        key = ANON.sub("ANON", name.strip())
        out[key] = "\n".join(lines)
        shown[key] = name.strip()
    return out


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
        return r.stdout.split("\n") if r.returncode == 0 else names
    except OSError:
        return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help=".cu files, relative to the repository root")
    ap.add_argument("--was", nargs="+", help="the files at --rev to compare with (default: the same paths)")
    ap.add_argument("--rev", default="HEAD", help="the git revision to compare against (default HEAD)")
    ap.add_argument("--arch", default="90", help="compute capability (default 90)")
    ap.add_argument("--ptx", action="store_true", help="compare PTX even when cuobjdump is found")
    a = ap.parse_args()
    nvcc = find_nvcc()
    cuobjdump = None if a.ptx else find_cuobjdump(nvcc)
    sass = cuobjdump is not None
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = os.path.join(tmp, "old")
        os.makedirs(old_tree)
        archive = subprocess.run(["git", "-C", ROOT, "archive", a.rev, "cpp", "cuda"], capture_output=True)
        if archive.returncode:
            sys.exit(f"codegen_same: git archive {a.rev} failed: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", old_tree], input=archive.stdout, check=True)
        shown, found, seconds = {}, [], []
        for tree, files, tag in ((old_tree, a.was or a.files, "old"), (ROOT, a.files, "new")):
            kernels, elapsed = {}, 0.0
            for i, f in enumerate(files):
                path = os.path.join(tmp, f"{tag}{i}.out")
                t0 = time.perf_counter()
                compile_to(nvcc, tree, f, a.arch, path, sass)
                elapsed += time.perf_counter() - t0
                for k, v in (sass_kernels(cuobjdump, path, shown) if sass else ptx_kernels(path, shown)).items():
                    kernels.setdefault(k, v)  # a kernel in several files: the first one's
            found.append(kernels)
            seconds.append(elapsed)
    old, new = found
    differ = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    size = lambda body: body.count("\n") + 1  # instructions (SASS) or lines (PTX)
    for k, name in zip(differ, demangle([shown[k] for k in differ])):
        if k in old and k in new:
            where = f"differs ({size(old[k])} -> {size(new[k])})"
        else:
            where = "only at " + a.rev if k in old else "only in the working tree"
        print(f"{where}: {name}")
    same = sum(old[k] == new[k] for k in set(old) & set(new))
    target = f"{'SASS sm' if sass else 'PTX compute'}_{a.arch}"
    print(f"{same} of {len(set(old) | set(new))} kernels the same as at {a.rev} ({' '.join(a.files)}, {target})")
    # Compile time is a budget: what the change costs, one file after another, this arch alone.
    for side, kernels, sec in ((a.rev, old, seconds[0]), ("working tree", new, seconds[1])):
        print(f"  {side}: {len(kernels)} kernels, {sum(map(size, kernels.values()))} "
              f"{'instructions' if sass else 'PTX lines'}, compiled in {sec:.1f} s")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
