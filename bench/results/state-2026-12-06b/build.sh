#!/bin/bash
# build.sh - session 38 (2026-12-06): main's state for issues 18, 19 and 20 in one call
# (run.sh), asked of an nvidia-h200 (the issues' goals name an H200). ~3 minutes.
export VARIANTS_DIR=bench/results/state-2026-12-06b
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
stage_devrun main
