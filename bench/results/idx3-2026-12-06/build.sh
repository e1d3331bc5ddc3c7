#!/bin/bash
# build.sh - session 38 (2026-12-06), issue 18: the indexer's wgmma scoring at three
# blocks an SM (idx3: __launch_bounds__(256, 3) for the wgmma paths, -DTC_MIN_BLOCKS_WG=3,
# branch wip/idx-3blocks: 80 registers, 110-130 bytes spilled by ptxas, where two blocks
# of 8 warps held an SM by their 124-128 registers; session 30's ncu found the decode
# shape's scoring latency-bound with 0.70 of 3.84 warps eligible), against main, whose
# test_gpu_ipc (both block sizes) runs too. From the repository root (~4 minutes).
export VARIANTS_DIR=bench/results/idx3-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "test_gpu_ipc"
build_variant idx3 "idx3" "-DTC_MIN_BLOCKS_WG=3"
stage_devrun main idx3
