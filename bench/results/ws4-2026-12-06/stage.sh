#!/bin/bash
# stage.sh - session 36's third call (2026-12-06): branch wip/ws4 (k_attn_ws4, four
# warpgroups: S and the softmax alone in WG0, O's halves in WG1 and WG2, the producer;
# SPARSECP_ATTN_WS4=1) built in /tmp/ws4b from the worktree /tmp/ws4 (cmake -S /tmp/ws4
# -B /tmp/ws4b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON; make test_gpu_kernels
# gpu_bench_kernels), its binaries into .devrun/ws4 with .devrun/lib and the FlashMLA
# wheel; then run.sh on the device with carry [".devrun"].
set -euo pipefail
rm -rf .devrun && mkdir -p .devrun/ws4
cp /tmp/ws4b/tests/gpu/test_gpu_kernels /tmp/ws4b/tests/gpu/gpu_bench_kernels .devrun/ws4/
/work/shared/tools/device-bundle .devrun/lib .devrun/ws4/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
bash bench/attn_anchor.sh prepare > /dev/null
du -sh .devrun
