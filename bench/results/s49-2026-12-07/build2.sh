#!/bin/bash
# build2.sh - stages run2.sh (from the repository root, ~6 minutes on two cores):
# .devrun/n = BASE (default HEAD) with units.patch (beside this script) applied
# (gpu_bench_kernels, test_gpu_kernels), .devrun/m = BASE (gpu_bench_kernels), the
# libraries in .devrun/lib, everything xz'd (device_common.sh unpacks it).
set -euo pipefail
BASE=${BASE:-HEAD}
patch=$(cd "$(dirname "$0")" && pwd)/units.patch
rm -rf .devrun && mkdir -p .devrun/n .devrun/m
for side in n m; do
  wt=/tmp/build2-$side
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$BASE"
  [ $side = n ] && git -C "$wt" apply "$patch"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
    || { tail "$wt/cmake.log"; exit 1; }
  targets="gpu_bench_kernels"; [ $side = n ] && targets="$targets test_gpu_kernels"
  make -C "$wt/build" -j"$(nproc)" $targets > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  for t in $targets; do cp "$wt/build/tests/gpu/$t" .devrun/$side/; done
  git worktree remove --force "$wt"
done
/work/shared/tools/device-bundle .devrun/lib .devrun/n/* > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
