#!/usr/bin/env bash
# Recovery under `sparsecp launch` (issue 22; docs/pipeline.md, "Recovery"), as an operator
# sees it:
#  1. a node other than the head is killed while two requests generate (one greedy, one
#     sampled): launch starts it again, it rejoins, and both clients receive exactly the
#     tokens of an undisturbed run, none twice, without an error;
#  2. the head is killed while a request generates: its client hears of it within 2 s
#     (exit 1), launch starts the whole cluster again, and a new request is served with
#     the same tokens as before;
#  3. SIGTERM then stops launch with status 0, no process and no folder left behind;
#  4. a node that keeps dying (--restarts 1): launch gives up and exits 1, nothing left;
#  5. a device fault on node 1 under a request: node 1 stops itself (its device context
#     is unusable), launch starts it again, it rejoins, the collectives are rebuilt, and
#     the client receives the undisturbed run's tokens without an error (--mps off: on a
#     GPU the fault stays node 1's only when its context is its own; under MPS it reaches
#     every rank on the GPU, tests/gpu/recovery_gpu.sh part 5);
#  6. a desync (node 1 asks for a collective the plan does not have) under a request: the
#     step is refused and run again, and the client gets the undisturbed run's tokens.
# SC_LAUNCH_EXTRA: more launch options (tests/gpu/recovery_gpu.sh: --device cuda; ctest
# cli_recovery_overlap: --overlap on, the two ranks' steps overlapped).
set -u
bin=$1
src=$2
model="$src/examples/model-small.json"
# shellcheck disable=SC2206
extra=(${SC_LAUNCH_EXTRA:-})
work=$(mktemp -d)
lpid=
. "$(dirname "$0")/launch_lib.sh"
# the tokens of a submit --json output file
tokens() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("error", "")); print(" ".join(map(str, d["tokens"])))' "$1"; }
# a request: submit --json to the launched cluster, output in $1, options $2...
ask() { out=$1; shift; "$bin" submit --connect "$listen" --vocab 4096 --json --timeout 60 "$@" > "$out"; }
greedy=(--prompt-len 40 --seed 3 --max-tokens 1500)
sampled=(--prompt-len 30 --seed 9 --temperature 0.8 --max-tokens 1500)

"$bin" launch --pcp 2 --dcp 2 --model "$model" "${extra[@]}" > "$work/l.out" 2> "$work/l.err" &
lpid=$!
await "$work/l.out" '"launched"' || fail "no launched line: $(cat "$work/l.err")"
listen=$(field "$work/l.out" listen)
pids=$(field "$work/l.out" pids)
# shellcheck disable=SC2086
set -- $pids
ask "$work/ref1.json" "${greedy[@]}" || fail "reference request 1 failed: $(cat "$work/ref1.json")"
ask "$work/ref2.json" "${sampled[@]}" || fail "reference request 2 failed: $(cat "$work/ref2.json")"

# a request streaming its tokens (no --json) into $1, options $2...
stream() { out=$1; shift; "$bin" submit --connect "$listen" --vocab 4096 --timeout 60 "$@" > "$out"; }
# waits (up to 20 s) until the streamed output $1 has 8 tokens: a loaded machine may not
# have sent a request a fixed time after its client started, and then a kill tests nothing
generating() {
  for _ in $(seq 400); do
    [ "$(head -1 "$1" 2>/dev/null | wc -w)" -ge 8 ] && return 0
    sleep 0.05
  done
  return 1
}

# 1. node 1 dies while both requests generate (request 1 streams: the kill waits for it)
stream "$work/got1.txt" "${greedy[@]}" &
c1=$!
ask "$work/got2.json" "${sampled[@]}" &
c2=$!
generating "$work/got1.txt"
kill -KILL "$2"
wait $c1 || fail "request 1 failed across the kill: $(cat "$work/got1.txt")"
wait $c2 || fail "request 2 failed across the kill: $(cat "$work/got2.json")"
grep -qE '[1-9][0-9]* running request\(s\) back in the queue' "$work/l.err" ||
  fail "the kill found no request running (nothing was tested): $(cat "$work/l.err")"
grep -q '"event":"restarted","rank":1' "$work/l.out" || fail "node 1 was not started again"
grep -q 'rejoined' "$work/l.err" || fail "no rejoin was logged: $(cat "$work/l.err")"
grep -q 'collectives is ready on all' "$work/l.err" || fail "the collectives were not rebuilt after the rejoin: $(cat "$work/l.err")"
grep -q '^\[done: ' "$work/got1.txt" || fail "request 1 did not end: $(cat "$work/got1.txt")"
[ "$(head -1 "$work/got1.txt" | xargs)" = "$(tokens "$work/ref1.json" | sed -n 2p)" ] ||
  fail "request 1's tokens differ from the undisturbed run's"
[ "$(tokens "$work/got2.json")" = "$(tokens "$work/ref2.json")" ] ||
  fail "request 2's tokens differ from the undisturbed run's"

# 2. the head dies under a generating request: its client hears of it within 2 s, the
# cluster comes back
stream "$work/got3.txt" "${greedy[@]}" &
c3=$!
generating "$work/got3.txt" || fail "request 3 did not start: $(cat "$work/got3.txt")"
t0=$(date +%s%N)
kill -KILL "$1"
wait $c3 && fail "request 3 succeeded although the head died under it: $(cat "$work/got3.txt")"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt 2000 ] || fail "the client heard of the head's death after $(( (t1 - t0) / 1000000 )) ms"
await "$work/l.out" '"event":"restarted","rank":0' || fail "the head was not started again: $(cat "$work/l.err")"
ok=
for _ in $(seq 50); do # the new cluster binds the same endpoint once it is ready
  ask "$work/got4.json" "${greedy[@]}" && { ok=1; break; }
  sleep 0.2
done
[ -n "$ok" ] || fail "no request was served after the head's restart: $(cat "$work/got4.json")"
[ "$(tokens "$work/got4.json")" = "$(tokens "$work/ref1.json")" ] ||
  fail "the restarted cluster's tokens differ"

# 3. SIGTERM: status 0 (every death so far was recovered), nothing left behind
cluster=$(field "$work/l.out" cluster)
kill -TERM "$lpid"
wait "$lpid"
rc=$?
lpid=
[ $rc -eq 0 ] || fail "launch exited $rc on SIGTERM after recovered deaths, expected 0"
pids=$(python3 -c 'import json,sys
print(" ".join(str(json.loads(l).get("pid", "")) for l in open(sys.argv[1]) if "\"restarted\"" in l))' "$work/l.out")
# shellcheck disable=SC2086
running $pids && fail "nodes left running: $pids"
[ -e "$cluster" ] && fail "the cluster folder was left behind"

# 4. --restarts 1: the second death of a node ends the cluster (exit 1)
"$bin" launch --pcp 2 --dcp 2 --model "$model" --restarts 1 "${extra[@]}" > "$work/g.out" 2> "$work/g.err" &
lpid=$!
await "$work/g.out" '"launched"' || fail "no launched line: $(cat "$work/g.err")"
kill -KILL "$(field "$work/g.out" pids | cut -d' ' -f2)"
await "$work/g.out" '"event":"restarted","rank":1' || fail "node 1 was not started again"
again=$(python3 -c 'import json,sys
print([json.loads(l)["pid"] for l in open(sys.argv[1]) if "\"restarted\"" in l][0])' "$work/g.out")
kill -KILL "$again"
wait "$lpid"
rc=$?
lpid=
[ $rc -eq 1 ] || fail "launch exited $rc past its restarts, expected 1"
grep -q 'giving up' "$work/g.err" || fail "launch did not say it gave up: $(cat "$work/g.err")"
pids="$(field "$work/g.out" pids) $again"
# shellcheck disable=SC2086
running $pids && fail "nodes left running: $pids"

# 5. a device fault on node 1: it stops itself and rejoins, the request goes on
"$bin" launch --pcp 2 --dcp 2 --model "$model" --inject devfault:1:3 --mps off "${extra[@]}" > "$work/f.out" 2> "$work/f.err" &
lpid=$!
await "$work/f.out" '"launched"' || fail "no launched line: $(cat "$work/f.err")"
listen=$(field "$work/f.out" listen)
ask "$work/f1.json" "${greedy[@]}" || fail "the request under a device fault failed: $(cat "$work/f1.json")"
grep -q 'device cannot be used again' "$work/f.err" || fail "no device fault was seen: $(cat "$work/f.err")"
grep -q '"event":"restarted","rank":1' "$work/f.out" || fail "node 1 was not started again: $(cat "$work/f.err")"
grep -q 'collectives is ready on all' "$work/f.err" || fail "the collectives were not rebuilt: $(cat "$work/f.err")"
[ "$(tokens "$work/f1.json")" = "$(tokens "$work/ref1.json")" ] || fail "the tokens across the device fault differ"
kill -TERM "$lpid"
wait "$lpid"
rc=$?
lpid=
[ $rc -eq 0 ] || fail "launch exited $rc on SIGTERM after the recovered device fault, expected 0"

# 6. a desync is refused, and the step run again
"$bin" launch --pcp 2 --dcp 2 --model "$model" --inject desync:1:5 "${extra[@]}" > "$work/s.out" 2> "$work/s.err" &
lpid=$!
await "$work/s.out" '"launched"' || fail "no launched line: $(cat "$work/s.err")"
listen=$(field "$work/s.out" listen)
ask "$work/s1.json" "${greedy[@]}" || fail "the request under a desync failed: $(cat "$work/s1.json")"
grep -q 'refused collective' "$work/s.err" || fail "no desync was refused: $(cat "$work/s.err")"
grep -q 'run it again' "$work/s.err" || fail "the step was not run again: $(cat "$work/s.err")"
[ "$(tokens "$work/s1.json")" = "$(tokens "$work/ref1.json")" ] || fail "the tokens after the retry differ"
kill -TERM "$lpid"
wait "$lpid"
lpid=

rm -rf "$work"
echo "recovery_cli: ok"
