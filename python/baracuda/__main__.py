"""python -m baracuda: what this build holds and which devices it sees. Exits 0 without a GPU."""
import sys

import baracuda as bc


def main() -> int:
    info = bc.build_info()
    print(f"baracuda {info['version']}")
    rt = info["cuda_runtime_version"]
    # CMake's "90-virtual" (PTX only, compiled by the driver at first use) is compute_90
    archs = ", ".join(f"compute_{a[:-len('-virtual')]}" if a.endswith("-virtual") else f"sm_{a.removesuffix('-real')}"
                      for a in info["cuda_archs"].split(","))
    print(f"  CUDA runtime  {rt // 1000}.{(rt % 1000) // 10}   archs: {archs}")
    feats = ", ".join(f"{k}={'on' if v else 'off'}" for k, v in info["features"].items())
    print(f"  features      {feats}")
    gi = bc.gemm_backend_info()  # loads cuBLASLt / cuBLAS (GEMM plans load them on first use anyway)
    v = gi["cublaslt_version"]  # major * 10000 + minor * 100 + patch
    lt = (f"cuBLASLt {v // 10000}.{v // 100 % 100}.{v % 100} ({gi['cublaslt_path']})" if gi["cublaslt_available"]
          else "cuBLASLt not found")
    cb = f"cuBLAS ({gi['cublas_path']})" if gi["cublas_available"] else "cuBLAS not found (tf32 GEMMs stay on cuBLASLt)"
    print(f"  libraries     {lt}; {cb}")
    devs = bc.devices()
    if not devs:
        print(f"  devices       none ({bc._C.device_probe_message() or 'no CUDA device'}); "
              "plans can be selected, not run")
    for d in devs:
        print(f"  device {d['ordinal']}      {d['name']} (sm_{d['sm']}, {d['multiprocessors']} SMs, "
              f"{d['total_memory'] / 2**30:.0f} GiB)")
    print("  plan families:")
    for fam in bc.families():
        dtypes = sorted({d.name for op in fam["ops"] for d in op["dtypes"]})
        nback = sum(op["backward"] for op in fam["ops"])
        print(f"    {fam['name']:<12} {fam['plan']}: {len(fam['ops'])} ops ({nback} with backward); "
              f"dtypes: {', '.join(dtypes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
