# variants.sh - sourced by build.sh, build4.sh and other calls' build scripts, which set
# VARIANTS_DIR to their own folder (from the repository root on the build
# machine): build_variant builds main's HEAD with patches of pending/ applied in a
# worktree under /tmp and copies its test_gpu_kernels and gpu_bench_kernels to
# .devrun/NAME; stage_devrun bundles the libraries (.devrun/lib, without cuBLAS, which
# the GPU machine has), xz's the binaries and the larger libraries, fetches the FlashMLA
# wheel and removes the worktrees.
set -euo pipefail
here=${VARIANTS_DIR:-bench/results/attn-cross-2026-12-05} # (the patches are $here/pending/*)
base=$(git rev-parse HEAD)
rm -rf .devrun && mkdir -p .devrun
build_variant() { # NAME "PATCHES" CUDA_FLAGS [EXTRA TARGETS]
  local name=$1 patches=$2 flags=$3 extra=${4:-} wt=/tmp/attn-cross-$1
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$base"
  for p in $patches; do git -C "$wt" apply "$PWD/$here/pending/$p.patch"; done
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON \
    ${flags:+-DCMAKE_CUDA_FLAGS=$flags} > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" test_gpu_kernels gpu_bench_kernels $extra > "$wt/make.log" 2>&1 \
    || { tail -20 "$wt/make.log"; exit 1; }
  mkdir -p ".devrun/$name"
  cp "$wt/build/tests/gpu/test_gpu_kernels" "$wt/build/tests/gpu/gpu_bench_kernels" ".devrun/$name/"
  for t in $extra; do cp "$(find "$wt/build" -name "$t" -type f -perm -u+x | head -1)" ".devrun/$name/"; done
  echo "$name: $base + ${patches:-nothing} ${flags}"
}
stage_devrun() { # NAMES...: the variants built (their worktrees go, where there are any)
  local v
  /work/shared/tools/device-bundle .devrun/lib .devrun/"$1"/* > /dev/null || true
  rm -f .devrun/lib/libcublas*
  find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
  find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
  bash bench/attn_anchor.sh prepare > /dev/null
  for v in "$@"; do
    [ ! -d "/tmp/attn-cross-$v" ] || git worktree remove --force "/tmp/attn-cross-$v"
  done
  du -sh .devrun
}
