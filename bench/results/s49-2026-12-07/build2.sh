#!/bin/bash
# build2.sh - stages run2.sh (from the repository root, a few minutes): for each
# SIDE:PATCH of SIDES (default: n = units.patch, p = units-pipe.patch, x =
# units-tiles.patch, m = none; FULL, a list of sides, adds sparsecp and the other GPU
# tests to those), BASE
# (default HEAD) with PATCH (beside this script) applied into .devrun/SIDE
# (gpu_bench_kernels; test_gpu_kernels where a patch applies), the libraries in
# .devrun/lib, everything xz'd (device_common.sh unpacks it).
set -euo pipefail
BASE=${BASE:-HEAD}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf .devrun && mkdir -p .devrun
for sp in ${SIDES:-n:units.patch p:units-pipe.patch x:units-tiles.patch m:}; do
  side=${sp%%:*} patch=${sp#*:} wt=/tmp/build2-${sp%%:*}
  mkdir -p .devrun/$side
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$BASE"
  targets="gpu_bench_kernels"
  if [ -n "$patch" ]; then git -C "$wt" apply "$here/$patch"; targets="$targets test_gpu_kernels"; fi
  # FULL: the sides that also carry sparsecp and the other GPU tests (session 50: the
  # state call for a merge follows the checks on the same warm machine, no time to build)
  [[ " ${FULL:-} " == *" $side "* ]] && targets="$targets sparsecp test_gpu_graphs test_gpu_nccl test_gpu_ipc"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 \
    || { tail "$wt/cmake.log"; exit 1; }
  make -C "$wt/build" -j"$(nproc)" $targets > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; exit 1; }
  for t in $targets; do cp "$(find "$wt/build" -type f -name "$t" -perm -u+x | head -1)" .devrun/$side/; done
  git worktree remove --force "$wt"
done
/work/shared/tools/device-bundle .devrun/lib .devrun/*/test_gpu_kernels .devrun/*/sparsecp > /dev/null || true
rm -f .devrun/lib/libcublas*
find .devrun -type f ! -path '.devrun/lib/*' -exec xz -T0 -6 {} +
find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -T0 -6 {} +
du -sh .devrun
