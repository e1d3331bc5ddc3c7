#!/bin/bash
# build8.sh - stages run8.sh (from the repository root, ~3 minutes): main's HEAD with
# -lineinfo into .devrun/li (gpu_bench_kernels, test_gpu_kernels; ncu's source page maps
# to lines), through the variants.sh of session 36.
export VARIANTS_DIR=bench/results/s51-2026-12-07
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant li "" "-lineinfo"
stage_devrun li
