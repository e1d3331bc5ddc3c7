#!/bin/bash
# build.sh - session 36's second call (2026-12-06): main (b1c5cc0, the look-ahead and the
# warps' releases merged) checked whole and profiled, against "local" (each consumer warp
# releases its own block's slot by one arrival too: pending/local.patch, branch
# wip/local-arrive). From the repository root on the build machine; stages .devrun/main
# (sparsecp, test_gpu_kernels, gpu_bench_kernels, test_gpu_graphs), .devrun/local and
# .devrun/li (gpu_bench_kernels with -lineinfo, for ncu's source page); then run.sh on
# the device with carry [".devrun"].
export VARIANTS_DIR=bench/results/fp8-prof-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp test_gpu_graphs"
build_variant local "local" ""
build_variant li "" "-lineinfo"
rm -f .devrun/li/test_gpu_kernels
stage_devrun main local li
