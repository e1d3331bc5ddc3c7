#!/bin/bash
# build.sh - session 37's third experiment call (issue 19): main (HEAD) against
#  - rebal3 (pending/rebal.patch, branch wip/ws-rebal): WG0 keeps O's column blocks 0-2
#    (192 columns; it had 4) and WG1 blocks 3-7 (320: an m64n256 and an m64n64 wgmma a
#    k-step), so that the warpgroup on the critical path (S, the softmax, P) does less of
#    P V: WG1 waited for WG0's next P about half its time (ncu, session 36). Registers
#    184 / 200 / 120, no spills.
# From the repository root on the build machine; then run.sh with carry [".devrun"].
export VARIANTS_DIR=bench/results/rebal-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant rebal3 "rebal" ""
stage_devrun main rebal3
