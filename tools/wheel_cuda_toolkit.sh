#!/usr/bin/env bash
# cibuildwheel's before-all on manylinux_2_28 (AlmaLinux 8): what the build needs of the CUDA toolkit
# (nvcc, the runtime's headers and static library, CCCL) from NVIDIA's RHEL 8 repository. cublasLt.h
# comes from the nvidia-cublas wheel, a build requirement; nothing of the toolkit is bundled.
#   CUDA_PKG_VERSION=13-0 bash tools/wheel_cuda_toolkit.sh
set -euo pipefail
ver="${CUDA_PKG_VERSION:-13-0}"
dnf install -y dnf-plugins-core
dnf config-manager --add-repo https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/cuda-rhel8.repo
dnf install -y "cuda-nvcc-${ver}" "cuda-cudart-devel-${ver}" "cuda-cccl-${ver}"
"/usr/local/cuda-${ver/-/.}/bin/nvcc" --version
