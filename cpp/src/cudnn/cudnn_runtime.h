// cuDNN, loaded at run time like cuBLASLt (see dynlib.h): the build needs only the headers, and a
// process without libcudnn runs everything else. The cudnn-frontend headers compiled with
// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING call through the handle loaded here.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <string>

namespace baracuda::cudnn {

// Loads libcudnn on the first call: already loaded (torch), BARACUDA_CUDNN (a path), the loader's
// path, or a directory registered with add_library_dir (the nvidia-cudnn wheel's).
bool available();
std::string load_error();    // why not available ("" when it is)
std::string library_path();  // what was loaded
int64_t version();           // cudnnGetVersion(), 0 when not loaded
// This thread's handle on `device`, created on first use (a handle is not for concurrent use
// from several threads). Throws Unsupported when cuDNN is not available, CudaError on failure.
cudnnHandle_t handle(int device);
// The device a plan's graphs are built on (the current one), or -1 with `why` set when cuDNN is not
// loaded or there is no device: what every family's build() checks after its own rule_out.
int build_device(std::string& why);

}  // namespace baracuda::cudnn
