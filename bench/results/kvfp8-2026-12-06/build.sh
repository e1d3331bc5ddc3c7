#!/bin/bash
# build.sh - session 41 (2026-12-06): main (d155fad) against fast (session 40's prepared
# patches: fast = wip/slots32, tf32 = wip/gemm-tf32, norms = wip/norm-warps; see
# bench/results/slots-2026-12-07/build.sh) and kvfp8 (fast + pending/kvfp8.patch: KV rows
# in fp8_ds_mla in the pipeline, `--kv-format fp8_ds_mla`, on both backends, and the
# few-heads attention kernel over those rows). From the repository root (~6 minutes).
export VARIANTS_DIR=bench/results/kvfp8-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
build_variant fast "fast tf32 norms" "" "sparsecp"
build_variant kvfp8 "fast tf32 norms kvfp8" "" "sparsecp test_gpu_graphs"
rm -f .devrun/main/test_gpu_kernels .devrun/main/gpu_bench_kernels \
  .devrun/fast/test_gpu_kernels .devrun/fast/gpu_bench_kernels
stage_devrun main fast kvfp8
