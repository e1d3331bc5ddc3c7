#!/bin/bash
# build4.sh - session 34's second call: k_attn_ws of main (HEAD) against pending/
# 4-fp8-loads.patch (fp8_ds_mla rows read by 16-byte loads, 64 contiguous bytes a row a
# step; and, unless -DWS_FP8_AHEAD=0, each producer thread of a cluster loading the next
# tile's share before it waits for the next slot). From the repository root on the build
# machine; stages .devrun/{main,p16,ahead} (test_gpu_kernels and gpu_bench_kernels, xz'd)
# with .devrun/lib and .devrun/whl (variants.sh); then run4.sh on the device with carry
# [".devrun"].
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant p16 "4-fp8-loads" "-DWS_FP8_AHEAD=0"
build_variant ahead "4-fp8-loads" ""
stage_devrun ahead main p16
