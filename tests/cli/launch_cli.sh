#!/usr/bin/env bash
# `sparsecp launch` as its users start it, in the ways that once went wrong:
#  - started by a parent that ignores SIGCHLD (children inherit that across exec): a
#    node that is killed is still reported, and SIGTERM still stops launch;
#  - a head that cannot bind the clients' endpoint: launch exits 1, no node stays up;
#  - a TMPDIR whose name holds quotes and spaces: the "launched" line is valid JSON, the
#    cluster folder is removed at the end, and nothing outside it is;
#  - a node killed just before SIGTERM: reported, and launch exits 1.
# (With --restarts 0: without it, launch starts a killed node again; recovery_cli.sh.)
set -u
bin=$1
src=$2
model="$src/examples/model-small.json"
work=$(mktemp -d)
lpid=
. "$(dirname "$0")/launch_lib.sh"

# 1. SIGCHLD ignored by the parent
python3 -c 'import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])' \
  "$bin" launch --pcp 2 --dcp 2 --model "$model" --restarts 0 > "$work/l1.out" 2> "$work/l1.err" &
lpid=$!
await "$work/l1.out" '"launched"' || fail "no launched line: $(cat "$work/l1.err")"
pids=$(field "$work/l1.out" pids)
# shellcheck disable=SC2086
set -- $pids
kill -KILL "$2"
await "$work/l1.out" '"exited","rank":1' || fail "the killed node was not reported: $(cat "$work/l1.out")"
kill -TERM "$lpid"
for _ in $(seq 100); do kill -0 "$lpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$lpid" 2>/dev/null && fail "launch did not stop on SIGTERM with SIGCHLD ignored"
wait "$lpid"
rc=$?
lpid=
[ $rc -eq 1 ] || fail "launch exited $rc after a node was killed, expected 1"
# shellcheck disable=SC2086
running $pids && fail "nodes left running: $pids"

# 2. a client endpoint the head cannot bind
timeout 30 "$bin" launch --pcp 2 --dcp 2 --model "$model" --listen "bogus://x" > "$work/l2.out" 2> "$work/l2.err"
rc=$?
[ $rc -eq 1 ] || fail "launch with an unusable --listen exited $rc, expected 1"
grep -q 'gateway' "$work/l2.err" || fail "the gateway's failure was not said: $(cat "$work/l2.err")"
pids=$(field "$work/l2.out" pids)
# shellcheck disable=SC2086
running $pids && fail "nodes left running: $pids"

# 3. a TMPDIR with a quote and a space, next to a folder its name could be mistaken for
odd="$work/q' '$work/victim"
mkdir -p "$odd" "$work/victim"
TMPDIR=$odd "$bin" launch --pcp 1 --model "$model" > "$work/l3.out" 2> "$work/l3.err" &
lpid=$!
await "$work/l3.out" '"launched"' || fail "no launched line: $(cat "$work/l3.err")"
cluster=$(field "$work/l3.out" cluster) || fail "the launched line is not JSON: $(cat "$work/l3.out")"
[ -f "$cluster" ] || fail "the cluster file $cluster does not exist"
kill -TERM "$lpid"
wait "$lpid"
rc=$?
lpid=
[ $rc -eq 0 ] || fail "launch exited $rc on SIGTERM, expected 0"
[ -d "$work/victim" ] || fail "a folder outside the cluster's was removed"
[ -z "$(ls -A "$odd")" ] || fail "the cluster folder was left behind: $(ls -A "$odd")"
# 4. a node killed just before SIGTERM: still reported, and launch exits 1 (it exited 0
#    without an "exited" line: its loop had not looked before the stop began)
"$bin" launch --pcp 2 --dcp 2 --model "$model" --restarts 0 > "$work/l4.out" 2> "$work/l4.err" &
lpid=$!
await "$work/l4.out" '"launched"' || fail "no launched line: $(cat "$work/l4.err")"
pids=$(field "$work/l4.out" pids)
# shellcheck disable=SC2086
set -- $pids
kill -KILL "$2"; kill -TERM "$lpid" # at once, as after a client's error
wait "$lpid"
rc=$?
lpid=
[ $rc -eq 1 ] || fail "launch exited $rc after a node was killed just before SIGTERM, expected 1"
grep -q '"exited","rank":1' "$work/l4.out" || fail "the killed node was not reported: $(cat "$work/l4.out")"

rm -rf "$work"
echo "launch_cli: ok"
