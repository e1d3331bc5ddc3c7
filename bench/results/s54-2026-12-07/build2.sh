#!/bin/bash
# build2.sh (session 54; from the repository root, ~5 minutes on two cores; ran at
# ba16a16): .devrun = HEAD + pending/notify-stream.patch (sparsecp and the GPU tests the
# notify path touches; sparsecp at .devrun/sparsecp, where tests/gpu/recovery_gpu.sh
# looks), .devrun/f = HEAD's sparsecp (the A/B's other side). run2.sh runs it.
set -euo pipefail
. bench/device_build.sh
p=bench/results/s54-2026-12-07/pending
rm -rf .devrun && mkdir -p .devrun
stage_build .devrun HEAD $p/notify-stream.patch sparsecp test_gpu_graphs test_gpu_nccl test_gpu_ipc
stage_build .devrun/f HEAD - sparsecp
stage_pack .devrun/sparsecp .devrun/test_gpu_*
