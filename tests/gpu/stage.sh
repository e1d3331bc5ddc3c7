#!/bin/bash
# stage.sh BUILD_DIR - copies the GPU test and benchmark binaries of BUILD_DIR into
# .devrun/ (git-ignored) with the libraries they need except cuBLAS (over 500 MB: the
# GPU machine has its own, found by device_run.sh), NCCL, the driver and the C runtime.
set -euo pipefail
build=${1:-build-cuda}
rm -rf .devrun && mkdir -p .devrun
cp "$build"/tests/gpu/test_gpu_kernels "$build"/tests/gpu/test_gpu_nccl \
  "$build"/tests/gpu/gpu_bench_kernels .devrun/
/work/shared/tools/device-bundle .devrun/lib .devrun/test_gpu_kernels .devrun/test_gpu_nccl \
  .devrun/gpu_bench_kernels || true  # exits 1 when a binary needs nothing to copy
rm -f .devrun/lib/libcublas*
du -sh .devrun
