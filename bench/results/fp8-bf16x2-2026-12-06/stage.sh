#!/bin/bash
# stage.sh - session 36's sixth call: main (build/, c31be5d) against branch wip/fp8-bf16x2
# (FlashMLA's dequantization: bf16x2 multiplies by the scale rounded to bf16), built in
# /tmp/b2b from the worktree /tmp/b2 (cmake -S /tmp/b2 -B /tmp/b2b
# -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON; make test_gpu_kernels
# gpu_bench_kernels); .devrun/{main,b2} and .devrun/lib; then run.sh with carry [".devrun"].
set -euo pipefail
make -C build -j2 test_gpu_kernels gpu_bench_kernels > /dev/null
rm -rf .devrun && mkdir -p .devrun/main .devrun/b2
cp build/tests/gpu/test_gpu_kernels build/tests/gpu/gpu_bench_kernels .devrun/main/
cp /tmp/b2b/tests/gpu/test_gpu_kernels /tmp/b2b/tests/gpu/gpu_bench_kernels .devrun/b2/
/work/shared/tools/device-bundle .devrun/lib .devrun/main/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
