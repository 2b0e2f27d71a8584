// Strided iteration spaces as pieces a 32-bit index covers (host code). The strided kernels
// index elements in 32 bits (a fast division per dim, no 64-bit division); a space of
// kIndex32Limit elements or more runs as several launches instead of a 64-bit copy of each
// kernel, which would double their compile time for tensors few programs have.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace baracuda::kernels {

// Under 2^31 with a margin: a block's threads past the end still compute their index.
constexpr int64_t kIndex32Limit = (int64_t(1) << 31) - 65536;
constexpr int kMaxPieceArgs = 8;

// Walks a space of `rank` dims (outermost first, shape[d] >= 1) in pieces under kIndex32Limit
// elements: the dims outside the one where the count crosses the limit one index at a time,
// that dim in chunks. For each piece calls piece(first, count, off): the piece spans dims
// [first, rank) with dim `first` limited to `count` indices (a chunk of one index drops its
// dim: first moves in by one; first == rank is a single element), and off[a] is operand a's
// element offset (sum of index * stride_of(a, d)) to the piece's first element.
template <class StrideOf, class Piece>
void for_each_index32_piece(int rank, const int64_t* shape, int nargs, StrideOf stride_of, Piece piece) {
  if (nargs > kMaxPieceArgs) throw std::logic_error("for_each_index32_piece: too many operands");
  int cut = rank;  // the outermost dim whose inner block (the dims inside it) holds under the limit
  int64_t inner = 1;
  while (cut > 0 && shape[cut - 1] < kIndex32Limit / inner) inner *= shape[--cut];
  if (cut == 0) {  // the whole space fits
    int64_t off[kMaxPieceArgs] = {};
    piece(0, rank ? shape[0] : 1, off);
    return;
  }
  --cut;  // the dim to chunk
  const int64_t per = (kIndex32Limit - 1) / inner;
  int64_t outer = 1;
  for (int d = 0; d < cut; ++d) outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base[kMaxPieceArgs] = {};
    int64_t rem = o;
    for (int d = cut - 1; d >= 0; --d) {
      const int64_t i = rem % shape[d];
      rem /= shape[d];
      for (int a = 0; a < nargs; ++a) base[a] += i * stride_of(a, d);
    }
    for (int64_t j = 0; j < shape[cut]; j += per) {
      const int64_t n = std::min(per, shape[cut] - j);
      int64_t off[kMaxPieceArgs];
      for (int a = 0; a < nargs; ++a) off[a] = base[a] + j * stride_of(a, cut);
      if (n > 1) piece(cut, n, off);
      else piece(cut + 1, cut + 1 < rank ? shape[cut + 1] : 1, off);
    }
  }
}

}  // namespace baracuda::kernels
