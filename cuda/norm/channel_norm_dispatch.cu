// Runtime dtype -> the channel-norm launcher instantiated for it (channel_norm_<dtype>.cu).
#include "common/dtype_traits.cuh"
#include "norm/channel_norm_launch.h"

namespace baracuda::norm {

template <class T> void chan_launch_t(const ChanNormLaunch& L, void* stream);

void chan_launch(const ChanNormLaunch& L, void* stream) {
  kernels::dispatch_dtype(L.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, kernels::f16> ||
                  std::is_same_v<T, kernels::bf16>) {
      chan_launch_t<T>(L, stream);
    } else {
      throw Unsupported(std::string("norm: no channel-norm kernel for ") + dtype_name(L.dtype));
    }
  });
}

}  // namespace baracuda::norm
