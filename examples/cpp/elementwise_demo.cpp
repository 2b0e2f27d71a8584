// The baracuda core from C++, without Python and without CUDA headers.
//
// Build against an installed wheel (tests/test_cpp_api.py does exactly this):
//   inc=$(python -c "import baracuda; print(baracuda.get_include())")
//   lib=$(python -c "import baracuda; print(baracuda.get_library_dir())")
//   g++ -std=c++17 -I"$inc" examples/cpp/elementwise_demo.cpp -L"$lib" -lbaracuda -Wl,-rpath,"$lib" -o demo
//   ./demo
//
// It selects two plans (silu on f32; add with broadcasting), prints their SKUs, shows a
// refused select, and, when a CUDA device is visible, runs both on random data and checks
// them against a float64 CPU reference (exit 1 on mismatch). Without a device it says so
// and exits 0.
#include <baracuda/baracuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace bc = baracuda;

namespace {

const char* error_kind(const bc::Error& e) {
  switch (e.code()) {
    case bc::ErrorCode::InvalidArgument: return "InvalidArgument";
    case bc::ErrorCode::InvalidDType: return "InvalidDType";
    case bc::ErrorCode::Unsupported: return "Unsupported";
    case bc::ErrorCode::CudaError: return "CudaError";
    case bc::ErrorCode::OutOfMemory: return "OutOfMemory";
  }
  return "Error";
}

// Device buffer that frees itself.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer(int64_t bytes, int device) : ptr(bc::device_malloc(bytes, device)) {}
  ~DeviceBuffer() { bc::device_free(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Largest error relative to max(1, |reference|).
double max_rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - ref[i]) / std::max(1.0, std::fabs(ref[i]));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

}  // namespace

int main() {
  const std::vector<int64_t> shape = {257, 1031};  // odd sizes: vector body plus a tail
  const std::vector<int64_t> row = {1031};         // broadcast along the first dimension

  // 1. Descriptors: pure data (op, operand specs, params). Empty strides = row-major.
  bc::ElementwiseDescriptor silu_desc{
      "silu", {bc::TensorSpec{shape, bc::DType::Float32, {}}}, bc::TensorSpec{shape, bc::DType::Float32, {}}, {}};
  bc::ElementwiseDescriptor add_desc{"add",
                                     {bc::TensorSpec{shape, bc::DType::Float32, {}},
                                      bc::TensorSpec{row, bc::DType::Float32, {}}},
                                     bc::TensorSpec{shape, bc::DType::Float32, {}},
                                     {{"alpha", 0.5}}};  // a + 0.5 * b

  // 2. select(): validates everything knowable without data and picks a kernel. No GPU needed.
  const bc::ElementwisePlan silu = bc::ElementwisePlan::select(silu_desc);
  const bc::ElementwisePlan add = bc::ElementwisePlan::select(add_desc);
  std::printf("silu plan: %s\n", silu.sku().str().c_str());
  std::printf("add plan: %s\n", add.sku().str().c_str());

  // 3. A refused select: silu is defined on floating types only. The error is typed and
  //    names the operand and what is supported.
  try {
    bc::ElementwiseDescriptor bad{
        "silu", {bc::TensorSpec{shape, bc::DType::Int32, {}}}, bc::TensorSpec{shape, bc::DType::Int32, {}}, {}};
    bc::ElementwisePlan::select(bad);
    std::printf("select(silu on int32) was accepted: unexpected\n");
    return 1;
  } catch (const bc::InvalidDType& e) {
    std::printf("refused: %s: %s\n", error_kind(e), e.what());
  }

  // 4. Run, if there is a device.
  const std::vector<bc::DeviceInfo> devs = bc::devices();
  if (devs.empty()) {
    std::printf("no CUDA device: skipped the run (%s)\n", bc::device_probe_message().c_str());
    return 0;
  }
  const int dev = devs[0].ordinal;
  std::printf("device %d: %s (sm_%d%d)\n", dev, devs[0].name.c_str(), devs[0].sm_major, devs[0].sm_minor);

  const int64_t n = numel(shape), nr = numel(row);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-8.f, 8.f);
  std::vector<float> x(n), b(nr), y(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : b) v = dist(rng);

  try {
    DeviceBuffer dx(n * 4, dev), db(nr * 4, dev), dy(n * 4, dev);
    bc::copy_to_device(dx.ptr, x.data(), n * 4);
    bc::copy_to_device(db.ptr, b.data(), nr * 4);
    const bc::TensorView vx = bc::make_view(dx.ptr, bc::DType::Float32, shape, {}, dev);
    const bc::TensorView vb = bc::make_view(db.ptr, bc::DType::Float32, row, {}, dev);
    const bc::TensorView vy = bc::make_view(dy.ptr, bc::DType::Float32, shape, {}, dev);

    // silu: y = x * sigmoid(x)
    silu.run(vy, {vx});  // default stream; no workspace needed
    bc::synchronize_stream(nullptr);
    bc::copy_to_host(y.data(), dy.ptr, n * 4);
    std::vector<double> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = double(x[i]) / (1.0 + std::exp(-double(x[i])));
    const double e1 = max_rel_err(y, ref);
    std::printf("silu run: max rel err %.3g\n", e1);

    // add with broadcasting: y = x + 0.5 * b[None, :]
    add.run(vy, {vx, vb});
    bc::synchronize_stream(nullptr);
    bc::copy_to_host(y.data(), dy.ptr, n * 4);
    for (int64_t i = 0; i < n; ++i) ref[i] = double(x[i]) + 0.5 * double(b[i % nr]);
    const double e2 = max_rel_err(y, ref);
    std::printf("add run: max rel err %.3g\n", e2);

    if (!(e1 <= 1e-5) || !(e2 <= 1e-6)) {
      std::printf("MISMATCH against the float64 reference\n");
      return 1;
    }
  } catch (const bc::Error& e) {
    std::printf("run failed: %s: %s\n", error_kind(e), e.what());
    return 1;
  }
  std::printf("run OK: results match the float64 reference\n");
  return 0;
}
