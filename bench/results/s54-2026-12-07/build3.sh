#!/bin/bash
# build3.sh (session 54; from the repository root, the working tree built in build/
# first; ~8 minutes on two cores): .devrun/d = build/'s sparsecp, test_gpu_kernels and
# test_gpu_graphs (HEAD 82d21a3 + pending/readback.patch: a run of requests' logits one
# read, the reads device copies the notify stream takes to the host), .devrun/c = HEAD +
# pending/coalesce.patch (the run alone), .devrun/f = HEAD, .devrun/o = ba16a16's
# test_gpu_kernels with HEAD's test file (the callback on the compute stream: its new
# case must fail there). run3.sh runs it.
set -euo pipefail
here=bench/results/s54-2026-12-07
rm -rf .devrun && mkdir -p .devrun/d
for t in sparsecp test_gpu_kernels test_gpu_graphs; do cp "$(find build -name "$t" -type f -perm -u+x | head -1)" .devrun/d/; done
build() { # DEST REV PATCH|- TARGETS...
  local dest=$1 rev=$2 patch=$3 wt=/tmp/s54-$(basename "$1"); shift 3
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$rev"
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$here/pending/$patch.patch"
  [ "$rev" = HEAD ] || git show HEAD:tests/gpu/test_gpu_kernels.c > "$wt/tests/gpu/test_gpu_kernels.c"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p "$dest"
  for t in "$@"; do cp "$(find "$wt/build" -name "$t" -type f -perm -u+x | head -1)" "$dest/"; done
  git worktree remove --force "$wt"
  echo "$dest: $(git rev-parse "$rev") + $patch"
}
build .devrun/c HEAD coalesce sparsecp
build .devrun/f HEAD - sparsecp
build .devrun/o ba16a16 - test_gpu_kernels
/work/shared/tools/device-bundle .devrun/lib .devrun/d/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
