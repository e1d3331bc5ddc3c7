#!/usr/bin/env bash
# The command-line contract of `sparsecp launch` + `sparsecp submit` (DESIGN.md §7):
# launch prints a "launched" line with the client endpoint and stays up; submit --json
# prints one object with the generated "tokens" (exit 0), or with "error" (exit 1, also
# when no connection or answer came); a
# SIGTERM stops launch with status 0 and no node left behind. Bad cluster options are
# refused as by `sparsecp run` (exit 2, an error) before any node starts.
set -u
bin=$1
src=$2
fail() { echo "FAIL: $*" >&2; [ -n "${lpid:-}" ] && kill "$lpid" 2>/dev/null; exit 1; }
out=$(mktemp)

# a bad --inject (or nccl without GPUs) is a usage error: no "launched" line, and no cluster
# folder was ever created in launch's TMPDIR
tmp=$(mktemp -d)
for bad in "--inject bogus" "--inject kill:5:1" "--inject kill:1:3x" "--collectives nccl" \
           "--inject nocomplete:0:2"; do
  # shellcheck disable=SC2086
  TMPDIR=$tmp timeout 20 "$bin" launch --pcp 2 --dcp 2 $bad > "$out" 2> "$out.err"
  rc=$?
  [ $rc -eq 2 ] || fail "launch $bad exited $rc, expected 2"
  grep -q 'error' "$out.err" || fail "launch $bad printed no error: $(cat "$out.err")"
  [ -s "$out" ] && fail "launch $bad printed '$(cat "$out")'"
  [ -z "$(ls -A "$tmp")" ] || fail "launch $bad started a cluster in $tmp"
done
rmdir "$tmp"

"$bin" launch --pcp 2 --dcp 2 --model "$src/examples/model-small.json" > "$out" 2>/dev/null &
lpid=$!
for _ in $(seq 100); do grep -q '"launched"' "$out" && break; sleep 0.1; done
line=$(grep '"launched"' "$out") || fail "launch printed no launched line"
listen=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["listen"])' "$line")
pids=$(python3 -c 'import json,sys; print(" ".join(map(str, json.loads(sys.argv[1])["pids"])))' "$line")

res=$("$bin" submit --connect "$listen" --prompt-len 9 --max-tokens 4 --vocab 4096 --json --timeout 60) \
  || fail "submit exited $? ($res)"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert len(d["tokens"]) == 4 and "error" not in d, d
assert all(0 <= t < 4096 for t in d["tokens"]), d
' "$res" || fail "submit --json printed '$res'"

printf '[1, 2, 99999]' > "$out.prompt"
res=$("$bin" submit --connect "$listen" --prompt-file "$out.prompt" --max-tokens 2 --json --timeout 60)
rc=$?
[ $rc -eq 1 ] || fail "a rejected request exited $rc, expected 1"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["tokens"] == [] and "vocabulary" in d["error"], d' "$res" \
  || fail "rejected request printed '$res'"

# failures before any answer still print the one object: an unusable endpoint, and a
# socket nobody serves (the timeout)
res=$("$bin" submit --connect "bogus://x" --prompt-len 3 --max-tokens 2 --json)
rc=$?
[ $rc -eq 1 ] || fail "submit to a bad endpoint exited $rc, expected 1"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["tokens"] == [] and "bogus" in d["error"], d' "$res" \
  || fail "bad endpoint printed '$res'"
res=$("$bin" submit --connect "ipc://$out.nobody" --prompt-len 3 --max-tokens 2 --json --timeout 1)
rc=$?
[ $rc -eq 1 ] || fail "submit with no answer exited $rc, expected 1"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["tokens"] == [] and "no answer" in d["error"], d' "$res" \
  || fail "unanswered submit printed '$res'"

# bad input is exit 2 (DESIGN.md §7), said before anything is sent: a stray argument, a
# temperature that is no float, a prompt file with a NUL byte (the scan used to stop there
# and send a shorter prompt), and a prompt too large for the gateway's socket (which drops
# it without an answer: the client used to wait for the whole --timeout)
"$bin" submit --connect "$listen" --prompt-len 3 --max-tokens 2 stray > /dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "submit with a stray argument exited $rc, expected 2"
"$bin" submit --connect "$listen" --prompt-len 3 --max-tokens 2 --temperature 1e300 > /dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "submit --temperature 1e300 exited $rc, expected 2"
printf '1\0002 3' > "$out.prompt"
"$bin" submit --connect "$listen" --prompt-file "$out.prompt" --max-tokens 2 > /dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a prompt file with a NUL byte exited $rc, expected 2"
res=$(timeout 20 "$bin" submit --connect "$listen" --prompt-len 4000000 --max-tokens 2 --json --timeout 60)
rc=$?
[ $rc -eq 2 ] || fail "an oversized prompt exited $rc, expected 2 ($res)"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["tokens"] == [] and "size limit" in d["error"], d' "$res" \
  || fail "oversized prompt printed '$res'"

kill -TERM "$lpid"
wait "$lpid"
rc=$?
[ $rc -eq 0 ] || fail "launch exited $rc after SIGTERM"
for p in $pids; do kill -0 "$p" 2>/dev/null && fail "node pid $p left behind"; done
rm -f "$out" "$out.err" "$out.prompt" "$out.nobody"
echo "submit_cli: all checks passed"
