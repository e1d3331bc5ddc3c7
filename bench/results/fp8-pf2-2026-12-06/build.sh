#!/bin/bash
# build.sh - session 37's last experiment call (issue 19): main (HEAD) against pf2
# (pending/pf2.patch, branch wip/fp8-pf2): the fp8_ds_mla producer of clusters, which
# bounds the fp8 decode (ncu, bench/kernels-cuda.md call 7: a quarter of its stall
# samples wait on its loads in spite of the one-tile look-ahead), fetches tile j + 2's
# row into L2 as tile j begins (prefetch.global.L2, the row's 128-byte lines shared by
# its 4 lanes: 1-2 instructions a thread a tile; session 36's l2 used
# cp.async.bulk.prefetch.L2 and lost 9%). From the repository root on the build
# machine; then run.sh with carry [".devrun"].
export VARIANTS_DIR=bench/results/fp8-pf2-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant pf2 "pf2" ""
stage_devrun main pf2
