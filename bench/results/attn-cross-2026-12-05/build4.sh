#!/bin/bash
# build4.sh - session 34's second call: k_attn_ws of main (HEAD) against pending/
# 4-fp8-loads.patch (fp8_ds_mla rows read by 16-byte loads, 64 contiguous bytes a row a
# step; and, unless -DWS_FP8_AHEAD=0, each producer thread of a cluster loading the next
# tile's share before it waits for the next slot). From the repository root on the build
# machine; stages .devrun/{main,p16,ahead} (test_gpu_kernels and gpu_bench_kernels, xz'd)
# with .devrun/lib and .devrun/whl; then run4.sh on the device with carry [".devrun"].
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
build_variant p16 "4-fp8-loads" "-DWS_FP8_AHEAD=0"
build_variant ahead "4-fp8-loads" ""
/work/shared/tools/device-bundle .devrun/lib .devrun/ahead/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
bash bench/attn_anchor.sh prepare > /dev/null
for v in main p16 ahead; do git worktree remove --force "/tmp/attn-cross-$v"; done
du -sh .devrun
