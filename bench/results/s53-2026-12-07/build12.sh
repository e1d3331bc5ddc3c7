#!/bin/bash
# build12.sh - what c2 ran as "a" (from the repository root, ~2 minutes on two cores,
# beside s52's build11.sh staging, which it keeps): main aa102ee + pending/allpick.patch
# (the cooperative select's passes with every block picking the bin itself), its
# sparsecp, test_gpu_kernels and gpu_bench_kernels in .devrun/a, xz'd; drops the FlashMLA
# wheel (issue 18's calls do not use it) to stay within the carry limit. (c2's binaries
# were built from branch wip/allpick, the same commit as the patch.)
set -euo pipefail
here=bench/results/s53-2026-12-07
wt=/tmp/s53-a
rm -rf "$wt"; git worktree prune
git worktree add -q --detach "$wt" HEAD
git -C "$wt" apply "$PWD/$here/pending/allpick.patch"
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
make -C "$wt/build" -j"$(nproc)" sparsecp test_gpu_kernels gpu_bench_kernels > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
rm -rf .devrun/a .devrun/whl && mkdir -p .devrun/a
cp "$wt/build/tests/gpu/test_gpu_kernels" "$wt/build/tests/gpu/gpu_bench_kernels" "$wt/build/tools/sparsecp" .devrun/a/
/work/shared/tools/device-bundle .devrun/lib .devrun/a/* > /dev/null || true
for f in .devrun/lib/*.xz; do rm -f "${f%.xz}"; done # (the bundle copies again what is packed)
rm -f .devrun/lib/libcublas*
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
xz -T0 -6 .devrun/a/*
git worktree remove --force "$wt"
du -sh .devrun
