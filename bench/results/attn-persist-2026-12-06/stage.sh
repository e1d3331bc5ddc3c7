#!/bin/bash
# (Ran from branch wip/persist, whose k_attn_ws has SPARSECP_ATTN_PERSIST; kept as the
# record of that call, bench/kernels-cuda.md "session 35".)
# stage.sh - session 35's call: the binaries of this tree (build/, configured with CUDA)
# into .devrun/new, with .devrun/lib and the FlashMLA wheel (.devrun/whl); then run.sh on
# the device with carry [".devrun"]. The comparison is in one binary:
# SPARSECP_ATTN_PERSIST=0 launches k_attn_ws a block an item, as before ws_work.
. bench/results/attn-cross-2026-12-05/variants.sh # (empties .devrun)
make -C build -j2 sparsecp test_gpu_kernels gpu_bench_kernels test_gpu_graphs > /dev/null
mkdir -p .devrun/new
cp build/tools/sparsecp build/tests/gpu/test_gpu_kernels build/tests/gpu/gpu_bench_kernels \
  build/tests/gpu/test_gpu_graphs .devrun/new/
if [ -n "${LINEINFO:-}" ]; then # the kernel benchmark with -lineinfo, for ncu's source page
  cmake -S . -B /tmp/build-li -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_FLAGS=-lineinfo > /dev/null
  make -C /tmp/build-li -j2 gpu_bench_kernels > /dev/null
  mkdir -p .devrun/li && cp /tmp/build-li/tests/gpu/gpu_bench_kernels .devrun/li/
fi
stage_devrun new
