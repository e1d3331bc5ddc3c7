#!/bin/bash
# build7.sh (session 56; from the repository root, ~4 minutes): .devrun/z = branch
# wip/readback (main + cuda_readback.cu: a step's small deferred reads and the notify's
# error flag read by a kernel, SPARSECP_CUDA_READBACK=copy for main's copies) with its
# test_gpu_kernels, beside build1.sh / build3.sh's binaries, for run7.sh.
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun/z
stage_build .devrun/z wip/readback - sparsecp test_gpu_kernels
xz -T0 -6 .devrun/z/sparsecp .devrun/z/test_gpu_kernels
du -sh .devrun
