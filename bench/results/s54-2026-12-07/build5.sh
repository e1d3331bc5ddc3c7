#!/bin/bash
# build5.sh (session 54, prepared; from the repository root, ~6 minutes on two cores):
# .devrun/n = HEAD + pending/device-draw.patch (margins.patch and the draws at a
# temperature on the device; sparsecp, test_gpu_kernels, test_gpu_graphs),
# .devrun/f = HEAD's sparsecp. run5.sh runs it. (Session 54 ran out of device time
# before it: the patch passed the CPU suite, 51 of 51, not yet the GPU.)
set -euo pipefail
here=bench/results/s54-2026-12-07
rm -rf .devrun && mkdir -p .devrun
build() { # DEST PATCH|- TARGETS...
  local dest=$1 patch=$2 wt=/tmp/s54-$(basename "$1"); shift 2
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" HEAD
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$here/pending/$patch.patch"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p "$dest"
  for t in "$@"; do cp "$(find "$wt/build" -name "$t" -type f -perm -u+x | head -1)" "$dest/"; done
  git worktree remove --force "$wt"
  echo "$dest: $(git rev-parse HEAD) + $patch"
}
build .devrun/n device-draw sparsecp test_gpu_kernels test_gpu_graphs
build .devrun/f - sparsecp
/work/shared/tools/device-bundle .devrun/lib .devrun/n/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
