#!/bin/bash
# build.sh - session 40's call for issue 18 (2026-12-06): main (5f29a24: notop, dcpmax and
# the swizzled sort merged) against posorder (pending/posorder.patch): every CUDA top-K
# output in ascending position instead of best-first, a bitmap and a prefix count in
# place of the bitonic sort (2.0 of a 32k prompt's 10.2 ms indexer a layer, H100, call 1
# of bench/results/next-2026-12-09). From the repository root (~4 minutes).
export VARIANTS_DIR=bench/results/posorder-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
build_variant posorder "posorder" "" "sparsecp test_gpu_graphs"
stage_devrun main posorder
