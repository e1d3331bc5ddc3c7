#!/bin/bash
# build5.sh (session 54, prepared; from the repository root, ~4 minutes on two cores):
# .devrun/n = HEAD + pending/device-draw.patch (margins.patch and the draws at a
# temperature on the device; sparsecp, test_gpu_kernels, test_gpu_graphs), .devrun/f =
# HEAD's sparsecp. run5.sh runs it. (Session 54 ran out of device time before it: the
# patch passed the CPU suite, 51 of 51, not yet the GPU.)
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun && mkdir -p .devrun
stage_build .devrun/n HEAD bench/results/s54-2026-12-07/pending/device-draw.patch sparsecp test_gpu_kernels test_gpu_graphs
stage_build .devrun/f HEAD - sparsecp
stage_pack .devrun/n/*
