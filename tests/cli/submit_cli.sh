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

# Who is served (issue 21): `launch --client-keys LIST` (with --listen-key-file) serves a
# client whose key pair is listed (`submit --client-key-file`); another key never gets
# through (no answer; the head logs the refusal), nor does a key made for the connection.
# Without a list, and on tcp without CURVE, the head says at start who can reach it. A
# list that cannot be used stops launch (exit 2) or the node (exit 1, the reason said)
# before anyone is served.
keys=$(mktemp -d)
for k in server good other; do
  "$bin" keygen > "$keys/$k.pair" || fail "keygen exited $?"
  (umask 077 && awk '/^secret/ {print $2}' "$keys/$k.pair" > "$keys/$k.key")
done
server_key=$(awk '/^public/ {print $2}' "$keys/server.pair")
{ echo "# the clients served"; awk '/^public/ {print $2}' "$keys/good.pair"; } > "$keys/list"
# waits up to 10 s for a line matching $2 in file $1
await() { for _ in $(seq 100); do grep -q "$2" "$1" && return 0; sleep 0.1; done; return 1; }
# a one-node launch with options $@ in the background (lpid), once it printed "launched"
launch_bg() {
  "$bin" launch --pcp 1 --model "$src/examples/model-small.json" "$@" > "$out" 2> "$out.err" &
  lpid=$!
  await "$out" '"launched"' || fail "launch $* printed no launched line: $(cat "$out.err")"
}
stop_launch() {
  kill -TERM "$lpid"
  wait "$lpid"
  local rc=$?
  lpid=
  [ $rc -eq 0 ] || fail "launch exited $rc after SIGTERM"
}
submit_keyed() {
  "$bin" submit --connect "$listen" --server-key "$server_key" --prompt-len 5 --max-tokens 2 \
    --vocab 4096 --json "$@"
}

"$bin" launch --pcp 1 --client-keys "$keys/list" > "$out" 2> "$out.err"
rc=$?
[ $rc -eq 2 ] || fail "--client-keys without --listen-key-file exited $rc, expected 2"
grep -q -- '--client-keys needs --listen-key-file' "$out.err" \
  || fail "--client-keys without --listen-key-file said '$(cat "$out.err")'"
"$bin" launch --pcp 1 --listen-key-file "$keys/server.key" --client-keys "$keys/good.pair" \
  > "$out" 2> "$out.err"
rc=$?
[ $rc -eq 2 ] || fail "a damaged --client-keys list exited $rc, expected 2"
grep -q 'line 1: not a CURVE public key' "$out.err" \
  || fail "a damaged --client-keys list said '$(cat "$out.err")'"

launch_bg --listen-key-file "$keys/server.key" --client-keys "$keys/list"
listen=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["listen"])' "$(grep '"launched"' "$out")")
res=$(submit_keyed --client-key-file "$keys/good.key" --timeout 60) || fail "the listed client: $res"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert len(d["tokens"]) == 2 and d["request_id"] > 0, d' "$res" \
  || fail "the listed client got '$res'"
for who in "--client-key-file $keys/other.key" ""; do
  # shellcheck disable=SC2086
  res=$(submit_keyed $who --timeout 2)
  rc=$?
  [ $rc -eq 1 ] || fail "an unlisted client ($who) exited $rc, expected 1: $res"
  case $res in *'no answer'*) ;; *) fail "an unlisted client ($who) printed '$res'" ;; esac
done
await "$out.err" 'refused a CURVE connection.*the key is not listed' \
  || fail "the head did not log the refusal: $(cat "$out.err")"
"$bin" submit --connect "$listen" --client-key-file "$keys/good.key" --prompt-len 5 --max-tokens 2 \
  > /dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--client-key-file without --server-key exited $rc, expected 2"
stop_launch

launch_bg --listen-key-file "$keys/server.key"
await "$out.err" 'anyone who holds the server key' \
  || fail "no warning that any key holder is served: $(cat "$out.err")"
grep -qF "key $server_key is served" "$out.err" || fail "the warning names no key: $(cat "$out.err")"
stop_launch
launch_bg --listen 'tcp://127.0.0.1:*'
await "$out.err" 'clients on tcp://127.0.0.1:\* are not authenticated and their traffic is readable' \
  || fail "no warning for a plain tcp client endpoint: $(cat "$out.err")"
stop_launch

# the node itself (a cluster file written by hand): a list it cannot use stops it with the
# reason, at once
cp "$keys/good.pair" "$keys/damaged"
python3 - "$keys" "$src/examples/model-small.json" > "$keys/cluster.json" <<'PY'
import json, sys
d, model = sys.argv[1], sys.argv[2]
print(json.dumps({"pcp": 1, "dcp": 1, "tp": 1, "listen": f"ipc://{d}/client",
                  "listen_key_file": "server.key", "client_keys_file": "damaged",
                  "nodes": [{"rank": 0, "endpoint": f"ipc://{d}/node", "tap": f"ipc://{d}/tap",
                             "coll": f"ipc://{d}/coll"}],
                  "pipeline": {"model_file": model}}))
PY
res=$(timeout 20 "$bin" node --cluster "$keys/cluster.json" --rank 0 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a node with a damaged client_keys_file exited $rc: $res"
case $res in *"gateway: cannot vet the clients"*"damaged, line 1: not a CURVE public key"*) ;;
*) fail "the node did not say why it stopped: $res" ;; esac
rm -rf "$keys"
rm -f "$out" "$out.err"
echo "submit_cli: all checks passed"
