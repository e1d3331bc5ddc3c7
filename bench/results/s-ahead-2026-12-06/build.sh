#!/bin/bash
# build.sh - session 37's second experiment call (issue 19): main (HEAD, the half
# barriers) against
#  - sahead (pending/sahead.patch, branch wip/s-ahead): WG0 issues tile j + 1's S right
#    behind tile j's P V and waits for both before it releases the slot, so that the
#    tensor cores run them back to back (before, the wait for P V, the release, the loop's
#    turn and the slot wait lay between); registers split by format so that nothing
#    spills (fp8 216/168/120, bf16 224/176/104; main 208/176/120 for both);
#  - regs (pending/regs.patch): the register split alone.
# From the repository root on the build machine; then run.sh with carry [".devrun"].
export VARIANTS_DIR=bench/results/s-ahead-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant sahead "sahead" ""
build_variant regs "regs" ""
stage_devrun main sahead regs
