#!/usr/bin/env bash
# `sparsecp checkpoint DIR [--json]` (issue 23): the checkpoints transformers' deepseek_v32
# saved (tests/data/hf_checkpoint/tiny-bf16 and its fp8 form tiny-fp8) are valid (exit 0,
# a summary that says they cannot be served yet); broken copies exit 2 with the tensor,
# shard or key named, and one with an unreadable shard exits 1; --memory on the published
# config (examples/deepseek-v3.2) and its refusals.
set -u
bin=$1
src=$2
data=$src/tests/data/hf_checkpoint/tiny-bf16
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$bin" checkpoint "$data" --json) || fail "valid directory exited $?"
python3 - "$out" <<'PY' || fail "--json summary: $out"
import json, sys
d = json.loads(sys.argv[1])
assert d["valid"] is True and d["servable"] is True and d["model_type"] == "deepseek_v32"
assert (d["layers"], d["dense_layers"], d["moe_layers"]) == (2, 1, 1)
assert (d["routed_experts"], d["shared_experts"], d["index_heads"], d["index_topk"]) == (4, 1, 2, 8)
assert d["tensors"] == 51 and d["shards"] == 3 and d["weights"] == "unquantized"
assert d["bytes"]["BF16"] > 0 and d["bytes"]["F8_E4M3"] == 0 and d["mtp_tensors_skipped"] == 0
assert d["eos_token_id"] == [1], d  # config.json's and generation_config.json's
PY
out=$("$bin" checkpoint "$2/tests/data/hf_checkpoint/tiny-fp8" --json) || fail "fp8 directory exited $?"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["weights"]=="fp8" and d["bytes"]["F8_E4M3"]>0 and d["tensors"]==83, d' \
  "$out" || fail "fp8 --json summary: $out"
"$bin" checkpoint "$data" | grep -q "valid deepseek_v32 directory" || fail "text summary"
"$bin" checkpoint "$data" | grep -q "run|launch --model-dir" || fail "the summary must say how to serve it"
"$bin" checkpoint "$data" | grep -q "ends at    token 1 (eos_token_id)" || fail "the summary must name the eos"

# broken copies: expect exit 2 and an error naming $2
broken() {
  local name=$1 want=$2
  out=$("$bin" checkpoint "$tmp/$name" --json); rc=$?
  [ $rc -eq 2 ] || fail "$name: exit $rc, expected 2 ($out)"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert list(d)==["error"] and sys.argv[2] in d["error"], d' \
    "$out" "$want" || fail "$name: $out lacks '$want'"
  "$bin" checkpoint "$tmp/$name" 2>&1 >/dev/null | grep -qF "$want" || fail "$name: text error lacks '$want'"
}
copy() { cp -r "$data" "$tmp/$1"; chmod -R u+w "$tmp/$1"; }

copy unlisted
python3 - "$tmp/unlisted/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
del d["weight_map"]["model.layers.1.mlp.experts.2.up_proj.weight"]
json.dump(d, open(p, "w"))
PY
broken unlisted 'tensor "model.layers.1.mlp.experts.2.up_proj.weight" is in model-00002-of-00003.safetensors, but the weight_map does not list it'

copy noshard
rm "$tmp/noshard/model-00003-of-00003.safetensors"
broken noshard 'shard model-00003-of-00003.safetensors'

copy extra
python3 - "$tmp/extra/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
d["weight_map"]["model.layers.0.mlp.gate.weight"] = "model-00001-of-00003.safetensors"
json.dump(d, open(p, "w"))
PY
broken extra 'extra tensor "model.layers.0.mlp.gate.weight"'

copy v3
sed -i 's/"deepseek_v32"/"deepseek_v3"/' "$tmp/v3/config.json"
broken v3 '"model_type" = "deepseek_v3" is not supported'

copy nokey
sed -i '/"index_topk"/d' "$tmp/nokey/config.json"
broken nokey '"index_topk" is missing'

copy layers
sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 1/' "$tmp/layers/config.json"
broken layers '"mlp_layer_types" must be a list of num_hidden_layers = 1 strings'

broken does-not-exist 'config.json'

# a shard that exists but cannot be opened (a link to itself: permissions do not stop
# root) is an I/O failure: exit 1, not 2
copy unreadable
rm "$tmp/unreadable/model-00002-of-00003.safetensors"
ln -s model-00002-of-00003.safetensors "$tmp/unreadable/model-00002-of-00003.safetensors"
out=$("$bin" checkpoint "$tmp/unreadable" --json); rc=$?
[ $rc -eq 1 ] || fail "unreadable shard: exit $rc, expected 1 ($out)"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert "model-00002-of-00003.safetensors" in d["error"], d' \
  "$out" || fail "unreadable shard: $out"
"$bin" checkpoint 2>/dev/null; [ $? -eq 2 ] || fail "no DIR should exit 2"
"$bin" checkpoint --help | grep -q "usage: sparsecp checkpoint" || fail "--help"

# --memory reads only the config: the published one (examples/deepseek-v3.2) at T 8, a
# directory or the file itself; the figures docs/model.md's table shows
out=$("$bin" checkpoint "$src/examples/deepseek-v3.2" --memory --tp 8 --json) ||
  fail "--memory exited $?: $out"
python3 -c '
import json, sys
d = json.loads(sys.argv[1]); b = d["bytes"]
assert d["tp"] == 8 and d["context"] == 163840 and d["weights_dtype"] == "fp8", d
assert b["weights_total"] == 674030337216 and b["kv_token_bf16"] == 61 * 704 * 2, d
assert 80 << 30 < b["weights_stored"] < 90 << 30 and b["kv_bf16"] == 163840 * b["kv_token_bf16"], d
assert b["kv_token_bf16_fp8_index"] == 61 * (576 * 2 + 144), d
' "$out" || fail "--memory: $out"
"$bin" checkpoint "$src/examples/deepseek-v3.2/config.json" --memory --pcp 4 --dcp 4 --tp 8 \
  --context 131072 | grep -q "KV cache, bf16" || fail "--memory text"
msg=$("$bin" checkpoint "$src/examples/deepseek-v3.2" --memory --pcp 2 --dcp 3 2>&1); rc=$?
[ $rc -eq 2 ] || fail "--memory at P 2 N 3: exit $rc ($msg)"
msg=$("$bin" checkpoint "$data" --tp 2 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -qF "go with --memory" || fail "--tp without --memory: $rc $msg"
echo "checkpoint_cli: ok"
