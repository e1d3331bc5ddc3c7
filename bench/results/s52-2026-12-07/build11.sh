#!/bin/bash
# build11.sh - stages run11.sh (from the repository root, ~5 minutes): main's HEAD into
# .devrun/f (sparsecp and every GPU test) and with -lineinfo into .devrun/li
# (gpu_bench_kernels, for ncu's source page), through the variants.sh of session 36.
export VARIANTS_DIR=bench/results/s52-2026-12-07
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant f "" "" "sparsecp test_gpu_graphs test_gpu_nccl test_gpu_ipc"
build_variant li "" "-lineinfo"
rm -f .devrun/li/test_gpu_kernels
stage_devrun f li
