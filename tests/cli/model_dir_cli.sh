#!/usr/bin/env bash
# Serving a DeepSeek-V3.2 checkpoint directory (issue 23, point 7): `sparsecp run
# --model-dir` on the checkpoints transformers saved (tests/data/hf_checkpoint: bf16, and
# fp8 dequantized on the CPU) across node processes, checked against a single-rank run
# (--verify) at the default (P2 N2 T1), with TP 2 and with all three; one node started by
# hand from a cluster file whose pipeline names the directory (model_dir) answers a
# request; and the refusals (exit 2 with the reason): --model with --model-dir, a
# directory that is not a checkpoint, --tp that does not divide the heads, model_dir with
# model_file in a cluster file.
set -u
bin=$1
src=$2
data=$src/tests/data/hf_checkpoint
work=$(mktemp -d)
pid=
fail() {
  echo "FAIL: $*" >&2
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  rm -rf "$work"
  exit 1
}

check_run() { # DIR ARGS...: run --verify --json, every greedy token checked, none differs
  local dir=$1; shift
  out=$("$bin" run --model-dir "$dir" "$@" --num-requests 10 --verify --json --quiet) ||
    fail "run --model-dir $dir $* exited $?: $out"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
v = d["verify"]
assert d["ok"] and d["requests"] == 10 and d["generated_tokens"] > 0, d
assert v["checked"] == 10 and v["mismatches"] == 0 and v["identical"] + v["ties"] == 10, v
' "$out" || fail "run --model-dir $dir $*: $out"
}
check_run "$data/tiny-bf16"
check_run "$data/tiny-bf16" --pcp 1 --dcp 1 --tp 2
check_run "$data/tiny-bf16" --pcp 2 --dcp 2 --tp 2
check_run "$data/tiny-fp8" --tp 2

refused() { # WANT ARGS...: exit 2 and WANT in the message
  local want=$1; shift
  msg=$("$bin" run "$@" --quiet 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "run $*: exit $rc, expected 2 ($msg)"
  echo "$msg" | grep -qF -- "$want" || fail "run $*: '$msg' lacks '$want'"
}
refused "exclude each other" --model "$src/examples/model-small.json" --model-dir "$data/tiny-bf16"
refused "config.json" --model-dir "$work"
refused "not divisible by tp = 4" --model-dir "$data/tiny-bf16" --pcp 1 --dcp 1 --tp 4

# a cluster file's pipeline names the directory (relative to the file's folder)
ln -s "$data/tiny-bf16" "$work/ckpt"
cat > "$work/c.json" <<JSON
{"pcp": 1, "dcp": 1, "tp": 1, "listen": "ipc://$work/client",
 "nodes": [{"rank": 0, "endpoint": "ipc://$work/node", "tap": "ipc://$work/tap",
            "coll": "ipc://$work/coll"}],
 "pipeline": {"model_dir": "ckpt"}}
JSON
"$bin" node --cluster "$work/c.json" --rank 0 > "$work/n.log" 2>&1 &
pid=$!
res=$("$bin" submit --connect "ipc://$work/client" --prompt-len 12 --max-tokens 5 --vocab 256 \
  --json --timeout 30) || fail "submit exited $?: $res ($(cat "$work/n.log"))"
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert len(d["tokens"])==5 and all(0<=t<256 for t in d["tokens"]), d' \
  "$res" || fail "submit printed '$res'"
sed 's/"model_dir": "ckpt"/"model_dir": "ckpt", "model_file": "x.json"/' "$work/c.json" > "$work/bad.json"
msg=$("$bin" node --cluster "$work/bad.json" --rank 0 2>&1); rc=$?
[ $rc -eq 2 ] || fail "model_dir with model_file: exit $rc ($msg)"
echo "$msg" | grep -qF "cannot be combined" || fail "model_dir with model_file: '$msg'"
rm -rf "$work"
echo "model_dir_cli: ok"
