#!/bin/bash
# build.sh - session 38 (2026-12-06), issue 20: the ipc rounds of a decode step as one
# kernel (branch wip/ipc-one-kernel, "fused") and the same launched with PDL
# (wip/ipc-pdl, "pdl"), against main; each variant's sparsecp and test_gpu_ipc only.
# From the repository root on the build machine (~6 minutes on two cores); then run.sh
# with carry [".devrun"].
set -euo pipefail
rm -rf .devrun && mkdir -p .devrun
build() { # NAME COMMIT
  local wt=/tmp/ipc-round-$1
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$2"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
    || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" sparsecp test_gpu_ipc > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p ".devrun/$1"
  cp "$wt/build/tools/sparsecp" "$wt/build/tests/gpu/test_gpu_ipc" ".devrun/$1/"
  echo "$1: $(git rev-parse --short "$2")"
}
build main main
build fused wip/ipc-one-kernel
build pdl wip/ipc-pdl
/work/shared/tools/device-bundle .devrun/lib .devrun/main/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
for v in main fused pdl; do git worktree remove --force "/tmp/ipc-round-$v"; done
du -sh .devrun
