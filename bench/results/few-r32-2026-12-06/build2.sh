#!/bin/bash
# build2.sh - the validation call of the merged 32-row prefill tiles (run2.sh): HEAD
# ("new": sparsecp, test_gpu_kernels, test_gpu_graphs) and the tree before it ("old",
# d89ef62: sparsecp). ~4 minutes.
set -euo pipefail
rm -rf .devrun && mkdir -p .devrun
build() { # NAME COMMIT TARGETS...
  local name=$1 commit=$2 wt=/tmp/few-r32-$1; shift 2
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$commit"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p ".devrun/$name"
  for t in "$@"; do cp "$(find "$wt/build" -name "$t" -type f -perm -u+x | head -1)" ".devrun/$name/"; done
  echo "$name: $(git rev-parse --short "$commit")"
}
build new HEAD sparsecp test_gpu_kernels test_gpu_graphs
build old d89ef62 sparsecp
/work/shared/tools/device-bundle .devrun/lib .devrun/new/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
for v in new old; do git worktree remove --force "/tmp/few-r32-$v"; done
du -sh .devrun
