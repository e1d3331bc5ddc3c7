#!/bin/bash
# build-next.sh - stages run-next.sh (from the repository root; ~5 minutes on two cores):
# HEAD (REV) into .devrun/m (sparsecp, gpu_bench_kernels and the four GPU tests), the
# libraries into .devrun/lib, everything xz'd (device_common.sh unpacks it).
set -euo pipefail
REV=${REV:-HEAD}
wt=/tmp/build-next
rm -rf "$wt"; git worktree prune
git worktree add -q --detach "$wt" "$REV"
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
  || { tail "$wt/cmake.log"; exit 1; }
make -C "$wt/build" -j"$(nproc)" sparsecp gpu_bench_kernels test_gpu_kernels test_gpu_graphs \
  test_gpu_nccl test_gpu_ipc > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
rm -rf .devrun && mkdir -p .devrun/m
cp "$wt"/build/tools/sparsecp "$wt"/build/tests/gpu/{gpu_bench_kernels,test_gpu_kernels,test_gpu_graphs,test_gpu_nccl,test_gpu_ipc} .devrun/m/
/work/shared/tools/device-bundle .devrun/lib .devrun/m/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
git worktree remove --force "$wt"
du -sh .devrun
