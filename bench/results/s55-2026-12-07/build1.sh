#!/bin/bash
# build1.sh (session 55; from the repository root, ~5 minutes): stages .devrun for
# run1.sh, built aside in .devrun.next and moved in at the end (a call may take .devrun
# meanwhile):
#  n = main a0fe4fe + draw-gaps.patch (session 54's device-draw.patch and this session's
#    step stamps, gaps.patch): sparsecp, test_gpu_kernels, test_gpu_graphs;
#  f = main a0fe4fe + gaps.patch: sparsecp (the baseline, with the gap's log line).
set -euo pipefail
. bench/device_build.sh
D=bench/results/s55-2026-12-07
rm -rf .devrun.next
stage_build .devrun.next/n a0fe4fe $D/draw-gaps.patch sparsecp test_gpu_kernels test_gpu_graphs
stage_build .devrun.next/f a0fe4fe $D/gaps.patch sparsecp
rm -rf .devrun && mv .devrun.next .devrun
stage_pack .devrun/n/*
