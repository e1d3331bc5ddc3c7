#!/bin/bash
# build2.sh - stages run2.sh / run3.sh (from the repository root, a few minutes on two
# cores): REV (default HEAD: the tree of session 44's merge or later) into .devrun/s2
# (sparsecp, test_gpu_kernels, gpu_bench_kernels, test_gpu_graphs) and main 3e62768, the
# tree before session 44, into .devrun/new (sparsecp, gpu_bench_kernels), the libraries
# they need into .devrun/lib, everything xz'd (device_common.sh unpacks it); and REV
# with dense-pos.patch (k_topk_dense loads the positions beside the words) into
# .devrun/dpos (gpu_bench_kernels, test_gpu_kernels) for run2.sh's PART 7.
set -euo pipefail
REV=${REV:-HEAD}
build() { # REV DIR PATCH TARGETS... (PATCH a file, or - for none)
  local rev=$1 wt=/tmp/build2-$2 patch=$3; shift 3
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$rev"
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$patch"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
    || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
}
build "$REV" s2 - sparsecp test_gpu_kernels gpu_bench_kernels test_gpu_graphs
build 3e62768 new - sparsecp gpu_bench_kernels
build "$REV" dpos bench/results/s44-2026-12-06/dense-pos.patch gpu_bench_kernels test_gpu_kernels
rm -rf .devrun && mkdir -p .devrun/s2 .devrun/new .devrun/dpos
cp /tmp/build2-dpos/build/tests/gpu/{gpu_bench_kernels,test_gpu_kernels} .devrun/dpos/
cp /tmp/build2-s2/build/tools/sparsecp /tmp/build2-s2/build/tests/gpu/{test_gpu_kernels,gpu_bench_kernels,test_gpu_graphs} .devrun/s2/
cp /tmp/build2-new/build/tools/sparsecp /tmp/build2-new/build/tests/gpu/gpu_bench_kernels .devrun/new/
/work/shared/tools/device-bundle .devrun/lib .devrun/s2/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
for d in s2 new dpos; do git worktree remove --force /tmp/build2-$d; done
du -sh .devrun
