#!/bin/bash
# stage.sh - session 36's fourth call (2026-12-06): branch wip/split-decode (decode
# tokens' splits from SPARSECP_SPLIT_DECODE, the split kernel of f32 rows, and
# SPARSECP_FEW_SPLIT, the few-heads kernel of bf16 rows; unset: 128 rows as main) built
# in /tmp/splitb from the worktree /tmp/split (cmake -S /tmp/split -B /tmp/splitb
# -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON; make test_gpu_kernels
# gpu_bench_kernels sparsecp) into .devrun/split with .devrun/lib; then run.sh on the
# device with carry [".devrun"].
set -euo pipefail
rm -rf .devrun && mkdir -p .devrun/split
cp /tmp/splitb/tests/gpu/test_gpu_kernels /tmp/splitb/tests/gpu/gpu_bench_kernels \
  /tmp/splitb/tools/sparsecp .devrun/split/
/work/shared/tools/device-bundle .devrun/lib .devrun/split/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
