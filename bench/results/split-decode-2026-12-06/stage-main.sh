#!/bin/bash
# stage-main.sh - session 36's fifth call: main's tree with decode splits of 64 rows
# (build/: sparsecp, test_gpu_kernels, gpu_bench_kernels) into .devrun/new, with
# .devrun/lib; then run-main.sh on the device with carry [".devrun"].
set -euo pipefail
make -C build -j2 sparsecp test_gpu_kernels gpu_bench_kernels > /dev/null
rm -rf .devrun && mkdir -p .devrun/new
cp build/tools/sparsecp build/tests/gpu/test_gpu_kernels build/tests/gpu/gpu_bench_kernels .devrun/new/
/work/shared/tools/device-bundle .devrun/lib .devrun/new/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
