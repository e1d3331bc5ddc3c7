#!/bin/bash
# build.sh - on the build machine, from the repository root: builds the binaries that
# run3.sh compares (main and main with the patches of pending/ applied in turn) in
# worktrees under /tmp, and stages them xz'd into .devrun/{main,new,new2,new3,new4} with
# .devrun/lib (device-bundle, without cuBLAS) and .devrun/whl (the FlashMLA wheel). Then
# call the device with carry [".devrun"] and run3.sh (see its header).
set -euo pipefail
here=bench/results/attn-cross-2026-12-05
base=$(git rev-parse HEAD)
targets="test_gpu_kernels gpu_bench_kernels"
rm -rf .devrun && mkdir -p .devrun
build_variant() { # NAME PATCHES CUDA_FLAGS
  local name=$1 patches=$2 flags=$3 wt=/tmp/attn-cross-$1
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$base"
  for p in $patches; do git -C "$wt" apply "$PWD/$here/pending/$p.patch"; done
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON \
    ${flags:+-DCMAKE_CUDA_FLAGS=$flags} > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" $targets > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p ".devrun/$name"
  cp "$wt/build/tests/gpu/test_gpu_kernels" "$wt/build/tests/gpu/gpu_bench_kernels" ".devrun/$name/"
  echo "$name: $base + ${patches:-nothing} ${flags}"
}
build_variant main "" ""
build_variant new "1-pfree" ""
build_variant new2 "1-pfree 2-lines" ""
build_variant new3 "1-pfree 2-lines 3-cols" ""
build_variant new4 "1-pfree 2-lines 3-cols" "-DWS_C0=64"
/work/shared/tools/device-bundle .devrun/lib .devrun/new3/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
xz -T0 -6 .devrun/lib/libopenblas.so.0 2> /dev/null || true
bash bench/attn_anchor.sh prepare > /dev/null
for v in main new new2 new3 new4; do git worktree remove --force "/tmp/attn-cross-$v"; done
du -sh .devrun
