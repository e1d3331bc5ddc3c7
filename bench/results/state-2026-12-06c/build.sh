#!/bin/bash
# build.sh - main's state for issue 18 after session 39's floors (main fd6cd15, built
# with -lineinfo for ncu's source page: the code is the same). From the repository root
# (~2 minutes).
export VARIANTS_DIR=bench/results/state-2026-12-06c
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "-lineinfo" "sparsecp"
stage_devrun main
