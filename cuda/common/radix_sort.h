// A stable sort of (uint32 key, int32 value) pairs by the key's low bits: CUB's
// DeviceRadixSort::SortPairs, compiled once (radix_sort.cu) for every family that sorts indices
// (embedding's gradient, MoE's token permutation).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace baracuda::radix_sort {

// Bits that hold every key in [0, max_key].
int bits_for(int64_t max_key);
// CUB's scratch bytes for n pairs over `bits`, or -1 when its size query fails (no device visible).
int64_t scratch_bytes(int64_t n, int bits);
// scratch_bytes, or (known = false) a generous estimate when no device answers: a plan selected on
// a machine without a GPU still reports a workspace, and run() asks CUB again.
int64_t scratch_bytes_or_estimate(int64_t n, int bits, bool& known);
// Throws CudaError naming `what` when CUB fails (a too-small scratch included).
void sort_pairs(const uint32_t* keys_in, uint32_t* keys_out, const int32_t* vals_in, int32_t* vals_out, int64_t n,
                int bits, void* scratch, int64_t scratch_size, cudaStream_t stream, const char* what);

}  // namespace baracuda::radix_sort
