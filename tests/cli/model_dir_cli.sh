#!/usr/bin/env bash
# Serving a DeepSeek-V3.2 checkpoint directory (issue 23, point 7): `sparsecp run
# --model-dir` on the checkpoints transformers saved (tests/data/hf_checkpoint: bf16, and
# fp8 dequantized on the CPU) across node processes, checked against a single-rank run
# (--verify) at the default (P2 N2 T1), with TP 2 and with all three; one node started by
# hand from a cluster file whose pipeline names the directory (model_dir) answers a
# request; and the refusals (exit 2 with the reason): --model with --model-dir, a
# directory that is not a checkpoint, --tp that does not divide the heads, model_dir with
# model_file in a cluster file. A --model file the example stream does not fit
# (examples/model-small.json) gets random requests by default, with a note.
# GLM-5 (glm_moe_dsa): a model of mkmodel's GLM layout (odd layers share the top-K of the
# layer before) is checked and served at (2,2,1), (1,2,2) and (2,2,2); the directory
# make_glm_logits.py saved with transformers (tests/data/hf_checkpoint/tiny-glm-bf16) too;
# broken indexer_types, a shared
# first layer and a contradicting indexer_rope_interleave are refused by `checkpoint` and
# `run` (exit 2, the key named). fp8 index keys (--index-format fp8) on the tiny checkpoint,
# the embedded model and the GLM layout, and fp8_ds_mla KV rows on the embedded model,
# against single-rank runs that keep them too.
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

check_verified() { # N ARGS...: run ARGS --verify --json serves N requests, every greedy
  # token checked, none differs (stderr in $work/run.err)
  local n=$1; shift
  out=$("$bin" run "$@" --verify --json --quiet 2> "$work/run.err") ||
    fail "run $* exited $?: $out"
  python3 -c '
import json, sys
d, n = json.loads(sys.argv[1]), int(sys.argv[2])
v = d["verify"]
assert d["ok"] and d["requests"] == n and d["generated_tokens"] > 0, d
assert v["checked"] == n and v["mismatches"] == 0 and v["identical"] + v["ties"] == n, v
' "$out" "$n" || fail "run $*: $out"
}
check_run() { # DIR ARGS...: the checkpoint in DIR serves 10 random requests, verified
  local dir=$1; shift
  check_verified 10 --model-dir "$dir" "$@" --num-requests 10
}
check_run "$data/tiny-bf16"
check_run "$data/tiny-bf16" --pcp 1 --dcp 1 --tp 2
check_run "$data/tiny-bf16" --pcp 2 --dcp 2 --tp 2
check_run "$data/tiny-fp8" --tp 2
# bf16 KV rows (--kv-format): the layouts against a single-rank run that keeps them too
check_run "$data/tiny-bf16" --pcp 2 --dcp 2 --kv-format bf16
msg=$("$bin" run --kv-format fp16 --quiet 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -qF -- "--kv-format must be f32, bf16 or fp8_ds_mla" ||
  fail "run --kv-format fp16: exit $rc ($msg)"
# fp8 index keys (--index-format fp8, docs/model.md): the layouts against a single-rank
# run that keeps them too, with bf16 KV rows, and on the embedded model
check_run "$data/tiny-bf16" --pcp 2 --dcp 2 --kv-format bf16 --index-format fp8
check_verified 8 --index-format fp8 --num-requests 8
msg=$("$bin" run --index-format bf16 --quiet 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -qF -- "--index-format must be kv or fp8" ||
  fail "run --index-format bf16: exit $rc ($msg)"
# fp8_ds_mla KV rows (--kv-format fp8_ds_mla, DeepSeek-V3.2's, its keys in fp8 rows of
# their own): the embedded model's layouts against a single-rank run that keeps them too;
# refused with the keys in the KV rows, and for a model of other widths (the tiny one's)
check_verified 8 --kv-format fp8_ds_mla --num-requests 8
msg=$("$bin" run --kv-format fp8_ds_mla --index-format kv --quiet 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -qF -- "index_format fp8" ||
  fail "run --kv-format fp8_ds_mla --index-format kv: exit $rc ($msg)"
msg=$("$bin" run --kv-format fp8_ds_mla --model-dir "$data/tiny-bf16" --quiet 2>&1 >/dev/null)
rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -qF -- "kv_lora_rank 512 and rope_dim 64 (this model: 32 and 8)" ||
  fail "run --kv-format fp8_ds_mla on the tiny checkpoint: exit $rc ($msg)"

# GLM-5
"$bin" mkmodel "$work/glm" --model-type glm_moe_dsa --dtype bf16 --layers 4 --dense-layers 1 \
  --hidden 128 --vocab 512 > /dev/null || fail "mkmodel --model-type glm_moe_dsa exited $?"
out=$("$bin" checkpoint "$work/glm" --json) || fail "checkpoint glm exited $?: $out"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["valid"] and d["servable"] and d["model_type"] == "glm_moe_dsa", d
assert d["index_rope"] == "interleaved" and d["index_shared_layers"] == 2, d
' "$out" || fail "checkpoint glm: $out"
check_run "$work/glm"
check_run "$work/glm" --pcp 1 --dcp 2 --tp 2
check_run "$work/glm" --pcp 2 --dcp 2 --tp 2
check_run "$work/glm" --pcp 2 --dcp 2 --index-format fp8 # shared layers write no keys
"$bin" checkpoint "$data/tiny-glm-bf16" > /dev/null || fail "checkpoint tiny-glm-bf16 exited $?"
check_run "$data/tiny-glm-bf16"
check_run "$data/tiny-glm-bf16" --pcp 2 --dcp 2 --tp 2
glm_refused() { # NAME WANT PYTHON-EDIT: a copy of the glm dir whose config the edit breaks
  mkdir "$work/$1"
  cp "$work/glm/"* "$work/$1/"
  python3 -c "
import json, sys
p = sys.argv[1]
c = json.load(open(p))
$3
json.dump(c, open(p, 'w'))
" "$work/$1/config.json" || fail "$1: cannot edit the config"
  msg=$("$bin" checkpoint "$work/$1" 2>&1); rc=$?
  [ $rc -eq 2 ] || fail "checkpoint $1: exit $rc, expected 2 ($msg)"
  echo "$msg" | grep -qF -- "$2" || fail "checkpoint $1: '$msg' lacks '$2'"
  msg=$("$bin" run --model-dir "$work/$1" --quiet 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "run --model-dir $1: exit $rc, expected 2 ($msg)"
  echo "$msg" | grep -qF -- "$2" || fail "run --model-dir $1: '$msg' lacks '$2'"
}
glm_refused glm-short '"indexer_types" must be a list of num_hidden_layers = 4' \
  'c["indexer_types"] = c["indexer_types"][:3]'
glm_refused glm-value '"indexer_types"[2] must be "full" or "shared"' \
  'c["indexer_types"][2] = "skip"'
glm_refused glm-first '"indexer_types" makes layer 0 "shared"' \
  'c["indexer_types"][0] = "shared"'
glm_refused glm-rope '"indexer_rope_interleave" = false contradicts' \
  'c["indexer_rope_interleave"] = False'

refused() { # WANT ARGS...: exit 2 and WANT in the message
  local want=$1; shift
  msg=$("$bin" run "$@" --quiet 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "run $*: exit $rc, expected 2 ($msg)"
  echo "$msg" | grep -qF -- "$want" || fail "run $*: '$msg' lacks '$want'"
}
refused "exclude each other" --model "$src/examples/model-small.json" --model-dir "$data/tiny-bf16"
refused "config.json" --model-dir "$work"
refused "not divisible by tp = 4" --model-dir "$data/tiny-bf16" --pcp 1 --dcp 1 --tp 4

# a model file the example stream does not fit (model-small: ids beyond its vocabulary of
# 4096) runs 8 random requests that fit it, with a note; the stream given by hand is refused
check_verified 8 --model "$src/examples/model-small.json"
grep -q "does not fit this model.*8 random requests instead" "$work/run.err" ||
  fail "run --model model-small.json gave no note: $(cat "$work/run.err")"
refused "not a token id below 4096" --model "$src/examples/model-small.json" \
  --requests "$src/examples/requests.jsonl"

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
  --ignore-eos --json --timeout 30)  # (five tokens whatever the checkpoint's eos, token 1) || fail "submit exited $?: $res ($(cat "$work/n.log"))"
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
