#!/bin/bash
# build5.sh - stages run5.sh (from the repository root, a few minutes on two cores):
# main's sparsecp, test_gpu_kernels, gpu_bench_kernels and test_gpu_graphs into
# .devrun/new; main with cut-atomics.patch applied (team_cut_edge: one shared atomic a
# key) into .devrun/cutatom (gpu_bench_kernels, test_gpu_kernels); the libraries they
# need into .devrun/lib (xz'd; device_common.sh unpacks them). Call run5.sh with carry
# [".devrun"] and PART="1 2 3" (4: racecheck, if time allows).
set -euo pipefail
build() { # PATCH DIR TARGETS...: main, with PATCH (a file, or - for none) applied
  local patch=$1 wt=/tmp/build5-$2; shift 2
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" main
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$patch"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
    || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
}
build - new sparsecp test_gpu_kernels gpu_bench_kernels test_gpu_graphs
build bench/results/few-2026-12-06/cut-atomics.patch cutatom test_gpu_kernels gpu_bench_kernels
rm -rf .devrun && mkdir -p .devrun/new .devrun/cutatom
cp /tmp/build5-new/build/tools/sparsecp /tmp/build5-new/build/tests/gpu/{test_gpu_kernels,gpu_bench_kernels,test_gpu_graphs} .devrun/new/
cp /tmp/build5-cutatom/build/tests/gpu/{test_gpu_kernels,gpu_bench_kernels} .devrun/cutatom/
/work/shared/tools/device-bundle .devrun/lib .devrun/new/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
git worktree remove --force /tmp/build5-new; git worktree remove --force /tmp/build5-cutatom
du -sh .devrun
