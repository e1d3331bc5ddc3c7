# device_build.sh - sourced by the bench/results/*/build*.sh scripts that stage binaries
# for a device call (from the repository root, on the build machine): the two steps every
# such script repeats.
#  stage_build DEST REV PATCH|- TARGETS...: REV (HEAD, a commit) in a worktree of its
#    own, with PATCH (a path; - for none) applied and the files named in STAGE_FROM_HEAD
#    (space-separated paths) taken from HEAD, built as CI builds (RelWithDebInfo, -Werror);
#    TARGETS copied to DEST;
#  stage_pack BINARY...: their shared libraries into .devrun/lib (the machine's cuBLAS is
#    used there, tests/gpu/cuda_env.sh), everything xz'd (device_common.sh unpacks it),
#    .devrun's size printed (a call carries at most 64 MiB).
stage_build() {
  local dest=$1 rev=$2 patch=$3 wt=/tmp/stage-$(basename "$1") f
  shift 3
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$rev"
  [ "$patch" = - ] || git -C "$wt" apply "$PWD/$patch"
  for f in ${STAGE_FROM_HEAD:-}; do git show "HEAD:$f" > "$wt/$f"; done
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSC_WERROR=ON > "$wt/cmake.log" 2>&1 || { tail "$wt/cmake.log"; return 1; }
  make -C "$wt/build" -j"$(nproc)" "$@" > "$wt/make.log" 2>&1 || { tail -20 "$wt/make.log"; return 1; }
  mkdir -p "$dest"
  for f in "$@"; do cp "$(find "$wt/build" -name "$f" -type f -perm -u+x | head -1)" "$dest/"; done
  git worktree remove --force "$wt"
  echo "$dest: $(git rev-parse "$rev") + $patch"
}

stage_pack() {
  /work/shared/tools/device-bundle .devrun/lib "$@" > /dev/null || true
  rm -f .devrun/lib/libcublas*
  find .devrun -type f ! -path '.devrun/lib/*' ! -name '*.xz' -exec xz -T0 -6 {} +
  # (-f: device-bundle copies a library again beside its packed copy of an earlier stage)
  find .devrun/lib -type f ! -name '*.xz' -size +200k -exec xz -f -T0 -6 {} +
  du -sh .devrun
}
