# launch_lib.sh - helpers of the scripts that drive `sparsecp launch` (sourced; they set
# $work, a temporary folder, and $lpid, launch's pid or empty).

# says why, kills launch (its nodes follow it), removes $work, exits 1
fail() {
  echo "FAIL: $*" >&2
  [ -n "$lpid" ] && kill -KILL "$lpid" 2>/dev/null
  rm -rf "$work"
  exit 1
}
# waits up to 20 s for a line matching $2 in file $1
await() { for _ in $(seq 200); do grep -q "$2" "$1" && return 0; sleep 0.1; done; return 1; }
# the JSON field $2 of the launched line in file $1 (pids: space-separated)
field() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    if "\"launched\"" in l: print(json.loads(l)[sys.argv[2]] if sys.argv[2] != "pids" else " ".join(map(str, json.loads(l)["pids"])))' "$1" "$2"; }
# whether any of the pids $@ still runs
running() { for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
