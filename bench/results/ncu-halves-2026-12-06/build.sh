#!/bin/bash
# build.sh - main with -lineinfo for ncu's source page (session 37): .devrun/mainli.
# From the repository root on the build machine; then run.sh with carry [".devrun"].
export VARIANTS_DIR=bench/results/ncu-halves-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant mainli "" "-lineinfo"
stage_devrun mainli
