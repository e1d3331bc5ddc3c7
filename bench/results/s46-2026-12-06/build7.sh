#!/bin/bash
# build7.sh - stages run7.sh (from the repository root, after build6.sh of session 45
# staged .devrun/next and .devrun/unif): REV (HEAD) with csel.patch (a token's radix select
# in one cluster of blocks, k_rsel_cluster) into .devrun/csel (sparsecp,
# gpu_bench_kernels, test_gpu_kernels), its libraries added to .devrun/lib, xz'd.
set -euo pipefail
REV=${REV:-HEAD}
P=bench/results/s46-2026-12-06
wt=/tmp/build7-csel
rm -rf "$wt"; git worktree prune
git worktree add -q --detach "$wt" "$REV"
git -C "$wt" apply "$PWD/$P/csel.patch"
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
  || { tail "$wt/cmake.log"; exit 1; }
make -C "$wt/build" -j"$(nproc)" sparsecp gpu_bench_kernels test_gpu_kernels > "$wt/make.log" 2>&1 \
  || { tail -20 "$wt/make.log"; exit 1; }
rm -rf .devrun/csel && mkdir -p .devrun/csel
cp "$wt"/build/tools/sparsecp "$wt"/build/tests/gpu/{gpu_bench_kernels,test_gpu_kernels} .devrun/csel/
/work/shared/tools/device-bundle .devrun/lib .devrun/csel/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun/csel -type f ! -name '*.xz' -exec xz -T0 -6 {} +
for f in .devrun/lib/*; do # (the bundle copies again what an earlier staging xz'd)
  case $f in *.xz) ;; *) if [ -e "$f.xz" ]; then rm -f "$f"; fi ;; esac
done
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
git worktree remove --force "$wt"
du -sh .devrun
