#!/bin/bash
# build.sh - stages session 43's first call (from the repository root, ~6 minutes on two
# cores): main's test_gpu_kernels and gpu_bench_kernels with -lineinfo (ncu's source
# counters) into .devrun/prof, and main's with the dense indexer's rings of three tiles
# (-DDN_STAGES=3: three blocks an SM over fp8_index keys, where four tiles hold two) into
# .devrun/s3.
set -euo pipefail
wt=/tmp/next-2026-12-10
rm -rf "$wt"; git worktree prune
git worktree add -q --detach "$wt" HEAD
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON \
  -DCMAKE_CUDA_FLAGS=-lineinfo > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
make -C "$wt/build" -j"$(nproc)" test_gpu_kernels gpu_bench_kernels > "$wt/make.log" 2>&1 \
  || { tail -20 "$wt/make.log"; exit 1; }
rm -rf .devrun && mkdir -p .devrun/prof .devrun/s3
cp "$wt/build/tests/gpu/test_gpu_kernels" "$wt/build/tests/gpu/gpu_bench_kernels" .devrun/prof/
cmake -S "$wt" -B "$wt/build3" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON \
  "-DCMAKE_CUDA_FLAGS=-lineinfo -DDN_STAGES=3" > "$wt/cmake3.log" 2>&1 || { tail "$wt/cmake3.log"; exit 1; }
make -C "$wt/build3" -j"$(nproc)" test_gpu_kernels gpu_bench_kernels > "$wt/make3.log" 2>&1 \
  || { tail -20 "$wt/make3.log"; exit 1; }
cp "$wt/build3/tests/gpu/test_gpu_kernels" "$wt/build3/tests/gpu/gpu_bench_kernels" .devrun/s3/
/work/shared/tools/device-bundle .devrun/lib .devrun/prof/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
git worktree remove --force "$wt"
du -sh .devrun
