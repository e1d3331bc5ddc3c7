#!/bin/bash
# build5.sh - after session 44's build2.sh (which stages .devrun/s2, new, dpos): HEAD with
# unif.patch (the wgmma scorers' descriptors from values broadcast from lane 0, so that
# ptxas keeps them in uniform registers; the fold's weights by 8-byte loads) into
# .devrun/unif (gpu_bench_kernels, test_gpu_kernels), xz'd as build2.sh does.
set -euo pipefail
wt=/tmp/build5-unif
rm -rf "$wt"; git worktree prune
git worktree add -q --detach "$wt" HEAD
git -C "$wt" apply "$PWD/bench/results/s45-2026-12-06/unif.patch"
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
  || { tail "$wt/cmake.log"; exit 1; }
make -C "$wt/build" -j"$(nproc)" gpu_bench_kernels test_gpu_kernels > "$wt/make.log" 2>&1 \
  || { tail -20 "$wt/make.log"; exit 1; }
rm -rf .devrun/unif && mkdir -p .devrun/unif
cp "$wt"/build/tests/gpu/{gpu_bench_kernels,test_gpu_kernels} .devrun/unif/
xz -T0 -6 .devrun/unif/*
git worktree remove --force "$wt"
du -sh .devrun
