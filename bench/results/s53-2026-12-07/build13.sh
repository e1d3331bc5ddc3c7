#!/bin/bash
# build13.sh (prepared for the next session; from the repository root, ~6 minutes on
# two cores): .devrun/a = HEAD + pending/allpick.patch with every GPU test binary and
# sparsecp, .devrun/f = HEAD's sparsecp and gpu_bench_kernels (the A/B's other side);
# ~35 MB, no FlashMLA wheel. run13.sh runs it.
set -euo pipefail
here=bench/results/s53-2026-12-07
rm -rf .devrun && mkdir -p .devrun
build() { # NAME PATCH|- TARGETS...
  local name=$1 patch=$2 wt=/tmp/s53-$1; shift 2
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" HEAD
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$here/pending/$patch.patch"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p ".devrun/$name"
  for t in "$@"; do cp "$(find "$wt/build" -name "$t" -type f -perm -u+x | head -1)" ".devrun/$name/"; done
  git worktree remove --force "$wt"
  echo "$name: $(git rev-parse HEAD) + $patch"
}
build a allpick sparsecp test_gpu_kernels gpu_bench_kernels test_gpu_graphs test_gpu_nccl test_gpu_ipc
build f - sparsecp gpu_bench_kernels
/work/shared/tools/device-bundle .devrun/lib .devrun/a/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
