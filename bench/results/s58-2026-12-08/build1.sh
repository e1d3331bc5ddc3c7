#!/bin/bash
# build1.sh (session 58; from the repository root, ~4 minutes): .devrun/l = main (from
# cf764ca on: the decode LSE merge in one ipc round) with its GPU tests, for run1.sh.
# SPARSECP_IPC_LSE_ROUND 1 and 0 in the same binary: one round and the plan's two.
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun/l .devrun/m
stage_build .devrun/l "${REV:-HEAD}" - sparsecp test_gpu_kernels test_gpu_graphs test_gpu_ipc
stage_pack .devrun/l/*
