#!/usr/bin/env bash
# Nodes started by hand from cluster files that are wrong in ways a parse cannot see:
#  - two nodes whose files differ in the pipeline's layout (interleave 1 on rank 0, 2 on
#    rank 1), as two hosts with different copies of the file would be: the plan's
#    fingerprint covers the collectives, not the layout each rank computes with, so this
#    used to give wrong tokens without an error. The step must fail naming the
#    difference. Likewise two nodes that differ in the KV cache's format or in the
#    synthetic model's seed (the engine's digest in the plan's configuration).
#  - a max_prompt_len longer than one client message can carry: the gateway would have
#    promised prompts it can never accept. The node refuses to start (exit 2).
#  - a head whose cluster never becomes ready: no step, and an answer for the waiting
#    request.
set -u
bin=$1
src=$2
work=$(mktemp -d)
pids=
fail() {
  echo "FAIL: $*" >&2
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$work"
  exit 1
}
# mismatch NAME EXPECT KEY0 VALUE0 KEY1 VALUE1: two nodes whose pipelines differ in
# KEY0=VALUE0 on rank 0 and KEY1=VALUE1 on rank 1 (a key "seed" goes into the model); the
# first step must fail with an error that contains EXPECT.
mismatch() {
  local name=$1 expect=$2 r res rc
  for r in 0 1; do
    python3 - "$work/$name" "$src/examples/model-small.json" "${@:$((3 + 2 * r)):2}" \
      > "$work/$name-c$r.json" <<'PY'
import json, sys
d, model, key, value = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
pipeline = {"model_file": model, "deadline_ms": 3000}
if key == "seed":
    pipeline = {"model": dict(json.load(open(model)), seed=value), "deadline_ms": 3000}
else:
    pipeline[key] = value
print(json.dumps({"pcp": 2, "dcp": 2, "tp": 1, "listen": f"ipc://{d}-client",
                  "nodes": [{"rank": r, "endpoint": f"ipc://{d}-node-{r}",
                             "tap": f"ipc://{d}-tap-{r}", "coll": f"ipc://{d}-coll-{r}"}
                            for r in range(2)],
                  "pipeline": pipeline}))
PY
  done
  for r in 0 1; do
    "$bin" node --cluster "$work/$name-c$r.json" --rank $r > "$work/$name-n$r.log" 2>&1 &
    pids="$pids $!"
  done
  res=$("$bin" submit --connect "ipc://$work/$name-client" --prompt-len 100 --max-tokens 4 \
    --vocab 4096 --json --timeout 30)
  rc=$?
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  # shellcheck disable=SC2086
  wait $pids 2>/dev/null
  pids=
  [ $rc -eq 1 ] || fail "$name: submit exited $rc, expected 1 (a failed step): $res"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["tokens"] == [] and "differs from the head" in d["error"] and sys.argv[2] in d["error"], d
' "$res" "$expect" || fail "$name: submit printed '$res'"
}
mismatch interleave interleave interleave 1 interleave 2
# the cache's format and the synthetic model's weights are not in the layout: the
# engine's digest rides with it
mismatch kv-format engine kv_format '"f32"' kv_format '"bf16"'
mismatch seed engine seed 1 seed 2

python3 - "$work" "$src/examples/model-small.json" > "$work/long.json" <<'PY'
import json, sys
d, model = sys.argv[1], sys.argv[2]
m = json.load(open(model))
m["max_position"], m["vocab"] = 1 << 20, 70000  # token ids of 5 bytes
print(json.dumps({"pcp": 1, "dcp": 1, "tp": 1, "listen": f"ipc://{d}/client1",
                  "nodes": [{"rank": 0, "endpoint": f"ipc://{d}/node1", "tap": f"ipc://{d}/tap1",
                             "coll": f"ipc://{d}/coll1"}],
                  "pipeline": {"model": m, "max_model_len": 1000000, "max_prompt_len": 400000}}))
PY
out=$(timeout 20 "$bin" node --cluster "$work/long.json" --rank 0 2>&1)
rc=$?
[ $rc -eq 2 ] || fail "a node promising 400000-token prompts of 5-byte ids exited $rc: $out"
case $out in *"max_prompt_len 400000 does not fit one client message"*"at most 209510"*) ;;
*) fail "unexpected error: $out" ;; esac

# A head whose cluster never becomes ready (rank 1 never starts) runs no step, and the
# request that waited meanwhile is answered with the reason when the head gives up (it
# used to be sent to rank 1's queue and left without an answer when the head exited).
"$bin" node --cluster "$work/interleave-c0.json" --rank 0 --ready-timeout 3000 \
  > "$work/alone.log" 2>&1 &
pids=$!
res=$("$bin" submit --connect "ipc://$work/interleave-client" --prompt-len 10 --max-tokens 4 --vocab 4096 \
  --json --timeout 20)
rc=$?
wait $pids
nrc=$?
pids=
[ $rc -eq 1 ] || fail "submit to a head that never became ready exited $rc: $res"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["tokens"] == [] and "not ready within 3000 ms" in d["error"], d
' "$res" || fail "submit printed '$res'"
[ $nrc -eq 1 ] || fail "the head exited $nrc: $(cat "$work/alone.log")"

# A cluster file over tcp, run as docs/cluster-file.md says (issue 21): refused without
# keys; `keygen --cluster` gives each node a key pair; the nodes then serve, a node given
# another node's key refuses to start, and a stranger's connection (a plain ZeroMQ
# DEALER, as an attacker on the network would open) delivers nothing: the nodes keep
# serving and log it at most once.
python3 - "$work" "$src/examples/model-small.json" > "$work/tcp.json" <<'PY'
import json, socket, sys
d, model = sys.argv[1], sys.argv[2]
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
p = [s.getsockname()[1] for s in socks]
for s in socks: s.close()
print(json.dumps({"pcp": 2, "dcp": 2, "tp": 1, "listen": f"tcp://127.0.0.1:{p[4]}",
                  "nodes": [{"rank": r, "endpoint": f"tcp://127.0.0.1:{p[r]}",
                             "coll": f"tcp://127.0.0.1:{p[2 + r]}"} for r in range(2)],
                  "pipeline": {"model_file": model}}))
PY
out=$(timeout 20 "$bin" node --cluster "$work/tcp.json" --rank 0 2>&1)
rc=$?
[ $rc -eq 2 ] || fail "a tcp cluster file without keys: node exited $rc: $out"
case $out in *"without CURVE keys"*"keygen --cluster"*) ;; *) fail "unexpected error: $out" ;; esac
"$bin" keygen --cluster "$work/tcp.json" > /dev/null || fail "keygen --cluster failed"
[ "$(stat -c %a "$work/tcp.json.keys/node-1.key")" = 600 ] || fail "a key file is not 0600"
listen=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["listen"])' "$work/tcp.json")
# node 1 started with node 0's key: its key file does not hold the key the file lists
python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); d["nodes"][1]["key_file"] = d["nodes"][0]["key_file"]
json.dump(d, open(sys.argv[2], "w"))' "$work/tcp.json" "$work/tcp-swapped.json"
out=$(timeout 20 "$bin" node --cluster "$work/tcp-swapped.json" --rank 1 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "a node with another node's key started"
case $out in *"is not node 1's"*) ;; *) fail "unexpected error: $out" ;; esac
for r in 0 1; do
  "$bin" node --cluster "$work/tcp.json" --rank $r > "$work/tcp$r.log" 2>&1 &
  pids="$pids $!"
done
first=$("$bin" submit --connect "$listen" --prompt-len 20 --max-tokens 4 --vocab 4096 --json \
  --timeout 30) || fail "the keyed tcp cluster did not serve: $first"
node0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][0]["endpoint"])' \
  "$work/tcp.json")
# Debian's python3 (python3-zmq, a make deps package), whatever python3 is first on PATH
/usr/bin/python3 - "$node0" <<'PY' || fail "the stranger's probe failed to run"
import sys, time, zmq
ctx = zmq.Context()
for i in range(200):  # connections of a stranger, each sending a frame a node would read
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.IDENTITY, b"n1")
    s.connect(sys.argv[1])
    try:  # (queued on the pipe of the connection being made; on a busy machine that pipe
          # may not exist yet, and the connection alone is the probe)
        s.send(b"\x05\x00\x00\x00garbage", zmq.NOBLOCK)
    except zmq.Again:
        pass
    s.close()
time.sleep(1.0)
ctx.term()
PY
again=$("$bin" submit --connect "$listen" --prompt-len 20 --max-tokens 4 --vocab 4096 --json \
  --timeout 30) || fail "the cluster stopped serving after a stranger's connections: $again"
[ "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$first")" = \
  "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$again")" ] \
  || fail "tokens changed after a stranger's connections: $first / $again"
# shellcheck disable=SC2086
kill -TERM $pids 2>/dev/null
# shellcheck disable=SC2086
wait $pids 2>/dev/null
pids=
lines=$(grep -c "dropped\|refused" "$work/tcp0.log")
[ "$lines" -le 2 ] || fail "a stranger's 200 connections wrote $lines log lines"

rm -rf "$work"
echo "cluster_file_cli: ok"
