#!/bin/bash
# build3.sh (session 54; from the repository root, the working tree built in build/
# first; ~8 minutes on two cores; ran at 82d21a3 + readback.patch in the working tree):
# .devrun/d = build/'s sparsecp, test_gpu_kernels and test_gpu_graphs (HEAD +
# pending/readback.patch: a run of requests' logits one read, the reads device copies the
# notify stream takes to the host), .devrun/c = HEAD + pending/coalesce.patch (the run
# alone), .devrun/f = HEAD, .devrun/o = ba16a16's test_gpu_kernels with HEAD's test file
# (the callback on the compute stream: its new case must fail there). run3.sh runs it.
set -euo pipefail
. bench/device_build.sh
p=bench/results/s54-2026-12-07/pending
rm -rf .devrun && mkdir -p .devrun/d
for t in sparsecp test_gpu_kernels test_gpu_graphs; do cp "$(find build -name "$t" -type f -perm -u+x | head -1)" .devrun/d/; done
stage_build .devrun/c HEAD $p/coalesce.patch sparsecp
stage_build .devrun/f HEAD - sparsecp
STAGE_FROM_HEAD=tests/gpu/test_gpu_kernels.c stage_build .devrun/o ba16a16 - test_gpu_kernels
stage_pack .devrun/d/*
