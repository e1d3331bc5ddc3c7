#!/bin/bash
# build.sh - main's binaries for the record of issues 18 and 19 on the machine they name
# (session 37): .devrun/main (sparsecp, gpu_bench_kernels, test_gpu_kernels) and the
# FlashMLA wheel. From the repository root on the build machine; then run.sh with carry
# [".devrun"] and kind nvidia-h200.
export VARIANTS_DIR=bench/results/state-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
stage_devrun main
