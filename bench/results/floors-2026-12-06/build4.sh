#!/bin/bash
# build4.sh - the fourth call of session 39: floors2 (branch wip/idx-sample at its third
# commit, pending/floors2.patch: the sampled floors with the sample's stride up to 32,
# and the few-heads fold scored transposed, keys as the mma rows) against main. From the
# repository root (~3 minutes).
export VARIANTS_DIR=bench/results/floors-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant floors2 "floors2" "" "sparsecp"
build_variant main "" "" "sparsecp"
stage_devrun floors2 main
