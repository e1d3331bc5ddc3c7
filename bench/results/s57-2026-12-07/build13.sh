#!/bin/bash
# build13.sh (session 57; from the repository root, ~4 minutes): .devrun/m = main at the
# end of session 57 (shared weights, readback kernels, the wide top-K merge with its 2048-key
# threshold) with its GPU tests, for run13.sh.
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun/m
stage_build .devrun/m "${REV:-HEAD}" - sparsecp test_gpu_kernels test_gpu_graphs test_gpu_ipc gpu_bench_kernels
stage_pack .devrun/m/*
