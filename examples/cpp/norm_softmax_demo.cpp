// A decoder step's row ops from C++: residual add + RMSNorm in one launch, then softmax over
// the rows, through the plan API. No Python, no CUDA headers.
//
// Build against an installed wheel (tests/test_cpp_api.py does exactly this):
//   inc=$(python -c "import baracuda; print(baracuda.get_include())")
//   lib=$(python -c "import baracuda; print(baracuda.get_library_dir())")
//   g++ -std=c++17 -I"$inc" examples/cpp/norm_softmax_demo.cpp -L"$lib" -lbaracuda -Wl,-rpath,"$lib" -o demo
//   ./demo
//
// It selects the two plans, prints their SKUs, shows two refused selects (an axis out of
// range; a bias on RMSNorm), and, when a CUDA device is visible, runs both on random data
// and checks them against a float64 CPU reference (exit 1 on mismatch). Without a device it
// says so and exits 0.
#include <baracuda/baracuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace bc = baracuda;

namespace {

struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer(int64_t bytes, int device) : ptr(bc::device_malloc(bytes, device)) {}
  ~DeviceBuffer() { bc::device_free(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Largest error relative to max(floor, |reference|): floor 1 for values of order one, a tiny
// floor for softmax probabilities (about 1 / H each: compared to their own size).
double max_rel_err(const std::vector<float>& got, const std::vector<double>& ref, double floor) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - ref[i]) / std::max(floor, std::fabs(ref[i]));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

}  // namespace

int main() {
  const int64_t rows = 37, H = 4096;  // a model width; an odd row count
  const std::vector<int64_t> shape = {rows, H};
  const bc::TensorSpec f32_rows{shape, bc::DType::Float32, {}};

  // 1. Descriptors (pure data) and select(): validation and the kernel choice, no GPU needed.
  bc::NormDescriptor norm_desc;
  norm_desc.op = "rms_norm";
  norm_desc.x = f32_rows;
  norm_desc.weight = bc::DType::Float32;
  norm_desc.residual = true;  // h = x + residual, written to residual_out, then normalized
  norm_desc.eps = 1e-6;
  bc::SoftmaxDescriptor softmax_desc;
  softmax_desc.op = "softmax";
  softmax_desc.inputs = {f32_rows};
  softmax_desc.axis = -1;
  softmax_desc.out = f32_rows;

  const bc::NormPlan norm = bc::NormPlan::select(norm_desc);
  const bc::SoftmaxPlan softmax = bc::SoftmaxPlan::select(softmax_desc);
  std::printf("rms_norm plan: %s\n", norm.sku().str().c_str());
  std::printf("softmax plan: %s\n", softmax.sku().str().c_str());

  // 2. Refused selects: typed errors that name the argument.
  try {
    bc::SoftmaxDescriptor bad = softmax_desc;
    bad.axis = 2;
    bc::SoftmaxPlan::select(bad);
    std::printf("select(softmax, axis=2 on a 2-d x) was accepted: unexpected\n");
    return 1;
  } catch (const bc::InvalidArgument& e) {
    std::printf("refused: InvalidArgument: %s\n", e.what());
  }
  try {
    bc::NormDescriptor bad = norm_desc;
    bad.bias = bc::DType::Float32;
    bc::NormPlan::select(bad);
    std::printf("select(rms_norm with a bias) was accepted: unexpected\n");
    return 1;
  } catch (const bc::InvalidArgument& e) {
    std::printf("refused: InvalidArgument: %s\n", e.what());
  }

  // 3. Run, if there is a device.
  const std::vector<bc::DeviceInfo> devs = bc::devices();
  if (devs.empty()) {
    std::printf("no CUDA device: skipped the run (%s)\n", bc::device_probe_message().c_str());
    return 0;
  }
  const int dev = devs[0].ordinal;
  std::printf("device %d: %s (sm_%d%d)\n", dev, devs[0].name.c_str(), devs[0].sm_major, devs[0].sm_minor);

  const int64_t n = rows * H, bytes = n * 4;
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> x(n), r(n), w(H), y(n), h(n), p(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : r) v = dist(rng);
  for (auto& v : w) v = 1.f + 0.25f * dist(rng);

  try {
    DeviceBuffer dx(bytes, dev), dr(bytes, dev), dw(H * 4, dev), dy(bytes, dev), dh(bytes, dev), dp(bytes, dev);
    bc::copy_to_device(dx.ptr, x.data(), bytes);
    bc::copy_to_device(dr.ptr, r.data(), bytes);
    bc::copy_to_device(dw.ptr, w.data(), H * 4);
    auto view = [&](void* ptr, const std::vector<int64_t>& s) { return bc::make_view(ptr, bc::DType::Float32, s, {}, dev); };

    // rms_norm with the residual: residual_out = h = x + r (f32), y = h * rstd * w.
    bc::NormTensors t;
    t.x = view(dx.ptr, shape);
    t.residual = view(dr.ptr, shape);
    t.residual_out = view(dh.ptr, shape);
    t.weight = view(dw.ptr, {H});
    t.y = view(dy.ptr, shape);
    norm.run(t);  // default stream; the forward needs no workspace
    // softmax over the normalized rows.
    softmax.run(view(dp.ptr, shape), {view(dy.ptr, shape)});
    bc::synchronize_stream(nullptr);
    bc::copy_to_host(h.data(), dh.ptr, bytes);
    bc::copy_to_host(y.data(), dy.ptr, bytes);
    bc::copy_to_host(p.data(), dp.ptr, bytes);

    std::vector<double> ref_h(n), ref_y(n), ref_p(n);
    for (int64_t i = 0; i < rows; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < H; ++j) {
        const double v = double(x[i * H + j] + r[i * H + j]);  // h is rounded once to f32
        ref_h[i * H + j] = v;
        ss += v * v;
      }
      const double rstd = 1.0 / std::sqrt(ss / double(H) + 1e-6);
      for (int64_t j = 0; j < H; ++j) ref_y[i * H + j] = ref_h[i * H + j] * rstd * double(w[j]);
      // The softmax reference starts from our y, so that its check is of the softmax alone.
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < H; ++j) m = std::max(m, double(y[i * H + j]));
      for (int64_t j = 0; j < H; ++j) s += std::exp(double(y[i * H + j]) - m);
      for (int64_t j = 0; j < H; ++j) ref_p[i * H + j] = std::exp(double(y[i * H + j]) - m) / s;
    }
    const double eh = max_rel_err(h, ref_h, 1.0), ey = max_rel_err(y, ref_y, 1.0), ep = max_rel_err(p, ref_p, 1e-30);
    std::printf("rms_norm run: max rel err residual_out %.3g, y %.3g\n", eh, ey);
    std::printf("softmax run: max rel err %.3g\n", ep);
    if (!(eh <= 1e-7) || !(ey <= 1e-5) || !(ep <= 1e-4)) {
      std::printf("MISMATCH against the float64 reference\n");
      return 1;
    }
  } catch (const bc::Error& e) {
    std::printf("run failed: %s\n", e.what());
    return 1;
  }
  std::printf("run OK: results match the float64 reference\n");
  return 0;
}
