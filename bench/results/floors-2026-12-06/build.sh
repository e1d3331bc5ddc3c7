#!/bin/bash
# build.sh - session 39 (2026-12-06), issue 18: the indexer's sampled floors (branch
# wip/idx-sample, pending/floors.patch) and session 38's prepared fbulk (branch
# wip/few-bulk, pending/fbulk.patch, -DFEW_BULK=1) against main, staged in one .devrun
# for the calls of run1.sh (floors), run2.sh (fbulk) and run3.sh (where the floors
# pass spends its time; floors built with -lineinfo from then on: codegen the same). From the repository root.
export VARIANTS_DIR=bench/results/floors-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant floors "floors" "-lineinfo" "sparsecp"
build_variant main "" ""
build_variant fbulk "fbulk" "-DFEW_BULK=1"
stage_devrun floors main fbulk
