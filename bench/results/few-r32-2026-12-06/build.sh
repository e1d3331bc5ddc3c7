#!/bin/bash
# build.sh - session 38 (2026-12-06), issue 18: the few-heads attention's prefill tokens
# in 32-row tiles, two stages a block (the next tile's rows load while one is computed),
# two blocks an SM ("r32", branch wip/few-r32, -DFEW_PREFILL_R32=1), against main. The
# call before (results/few-bytes-2026-12-06) found the kernel's time 2.5x its compute
# alone and only 11% shorter with 43% fewer bytes: loads not overlapped, not bandwidth.
# Each row block's S is two warps' k halves added through shared memory (half 0 + half
# 1, a fixed order). ~4 minutes.
export VARIANTS_DIR=bench/results/few-r32-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant r32 "r32" "-DFEW_PREFILL_R32=1" "sparsecp"
stage_devrun main r32
