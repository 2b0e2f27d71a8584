// The fp8_decode harness of tools/probe/probe.sh: cuda/common/dtype_traits.cuh's e4m3x2_to_half2_sw (the
// sm_80 path, sm_89+ take the cvt) against the hardware cvt on this GPU, for every e4m3 byte pair; bit
// for bit, NaN against NaN. Prints the pairs that differ (the first 8) and a count; exit 1 on any.
//   bash tools/probe/probe.sh fp8_decode cuda/common/dtype_traits.cuh base
#include <cuda_fp8.h>

#include <cstdio>
#include <vector>

#include "common/dtype_traits.cuh"
#include "probe_common.cuh"

__global__ void decode_both(uint32_t* sw, uint32_t* hw) {
  const uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;  // one pair per thread, 65536 of them
  const __half2_raw a = baracuda::kernels::e4m3x2_to_half2_sw(bits);
  const __half2_raw b = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(bits), __NV_E4M3);
  sw[bits] = uint32_t(a.x) | (uint32_t(a.y) << 16);
  hw[bits] = uint32_t(b.x) | (uint32_t(b.y) << 16);
}

static bool nan16(uint32_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

int main() {
  uint32_t *sw, *hw;
  PROBE_CHECK(cudaMalloc(&sw, 65536 * 4));
  PROBE_CHECK(cudaMalloc(&hw, 65536 * 4));
  decode_both<<<256, 256>>>(sw, hw);
  PROBE_CHECK(cudaGetLastError());
  const std::vector<uint32_t> a = probe::to_host<uint32_t>(sw, 65536), b = probe::to_host<uint32_t>(hw, 65536);
  int bad = 0;
  for (uint32_t i = 0; i < 65536; ++i)
    for (int lane = 0; lane < 2; ++lane) {
      const uint32_t x = (a[i] >> (16 * lane)) & 0xffffu, y = (b[i] >> (16 * lane)) & 0xffffu;
      if (x == y || (nan16(x) && nan16(y))) continue;
      if (bad++ < 8) std::printf("pair %04x lane %d: software %04x, cvt %04x\n", i, lane, x, y);
    }
  std::printf("e4m3 decode: %d of 131072 values differ from the cvt\n", bad);
  return bad ? 1 : 0;
}
