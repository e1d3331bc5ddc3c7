#!/bin/bash
# build6.sh - stages run6.sh (from the repository root; ~8 minutes on two cores): HEAD
# (REV: main d5b6104 or later, the tree with uniform descriptors) into
# .devrun/unif (gpu_bench_kernels), and REV with groups4.patch (the group rule of 7 in 8
# blocks, floors up to S = 128 for many products, cut bins sized by the group) into
# .devrun/next (gpu_bench_kernels, test_gpu_kernels, sparsecp), the libraries into
# .devrun/lib, everything xz'd (device_common.sh unpacks it).
set -euo pipefail
REV=${REV:-HEAD}
P=bench/results/s45-2026-12-06
build() { # DIR PATCH TARGETS... (PATCH a file, or - for none)
  local wt=/tmp/build6-$1 patch=$2; shift 2
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$REV"
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$patch"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
    || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
}
build unif - gpu_bench_kernels
build next $P/groups4.patch sparsecp gpu_bench_kernels test_gpu_kernels
rm -rf .devrun && mkdir -p .devrun/unif .devrun/next
cp /tmp/build6-unif/build/tests/gpu/gpu_bench_kernels .devrun/unif/
cp /tmp/build6-next/build/tools/sparsecp /tmp/build6-next/build/tests/gpu/{gpu_bench_kernels,test_gpu_kernels} .devrun/next/
/work/shared/tools/device-bundle .devrun/lib .devrun/next/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
for d in unif next; do git worktree remove --force /tmp/build6-$d; done
du -sh .devrun
