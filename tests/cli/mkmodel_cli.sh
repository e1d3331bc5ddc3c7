#!/usr/bin/env bash
# `sparsecp mkmodel` (issue 23, point 5): the generated checkpoints (fp8 with block scales
# and bf16; sharded with an index, and a single model.safetensors) pass `sparsecp
# checkpoint`, are the same bytes for the same seed, and are served by `sparsecp run
# --model-dir ... --verify` on (P,N,T) = (2,2,1), (4,4,1), (2,2,2) against the
# single-rank run (and (1,1,1) itself), with greedy tokens that are not all one token; the
# refusals (exit 2, nothing written or touched): an existing non-empty DIR, bad sizes, a
# bad dtype or model type, a missing parent; a write that fails part-way (a file size
# limit) exits 1 and leaves nothing behind.
set -u
bin=$1
work=$(mktemp -d)
fail() {
  echo "FAIL: $*" >&2
  rm -rf "$work"
  exit 1
}

mk() { # DIR ARGS...: mkmodel --json, exit 0
  local dir=$1; shift
  out=$("$bin" mkmodel "$dir" "$@" --json) || fail "mkmodel $dir $* exited $?: $out"
}
mk "$work/fp8"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["weights"] == "fp8" and d["layers"] == 4 and d["dense_layers"] == 2, d
assert d["routed_experts"] == 16 and d["hidden"] == 256 and d["shards"] == 2, d
' "$out" || fail "mkmodel printed $out"
mk "$work/bf16" --dtype bf16 --shards 3 --seed 7
mk "$work/one" --shards 1 --layers 2 --dense-layers 1 --experts 8 --hidden 128 --vocab 512
mk "$work/fp8-again"
mk "$work/fp8-seed2" --seed 2

# the layout: files as transformers saves them
for f in config.json generation_config.json model.safetensors.index.json \
  model-00001-of-00002.safetensors model-00002-of-00002.safetensors; do
  [ -f "$work/fp8/$f" ] || fail "fp8: $f missing"
done
[ -f "$work/bf16/model-00003-of-00003.safetensors" ] || fail "bf16: third shard missing"
[ -f "$work/one/model.safetensors" ] && [ ! -e "$work/one/model.safetensors.index.json" ] ||
  fail "one shard: expected model.safetensors and no index ($(ls "$work/one"))"
# deterministic from the seed
for f in config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors \
  model.safetensors.index.json; do
  cmp -s "$work/fp8/$f" "$work/fp8-again/$f" || fail "same seed, different $f"
done
cmp -s "$work/fp8/model-00001-of-00002.safetensors" "$work/fp8-seed2/model-00001-of-00002.safetensors" &&
  fail "seeds 1 and 2 wrote the same weights"

check() { # DIR WEIGHTS SHARDS: sparsecp checkpoint --json accepts it
  out=$("$bin" checkpoint "$1" --json) || fail "checkpoint $1 exited $?: $out"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["valid"] and d["servable"] and d["model_type"] == "deepseek_v32", d
assert d["weights"] == sys.argv[2] and d["shards"] == int(sys.argv[3]), d
assert d["index_heads"] == 4 and d["index_head_dim"] == 64 and d["index_topk"] == 64, d
assert d["unknown_config_keys"] == 0 and d["rope"] == "yarn", d
b = d["bytes"]
assert (b["F8_E4M3"] > 0) == (sys.argv[2] == "fp8") and b["BF16"] > 0, d
' "$out" "$2" "$3" || fail "checkpoint $1: $out"
}
check "$work/fp8" fp8 2
check "$work/bf16" unquantized 3
check "$work/one" fp8 1

# served, each layout checked against the single-rank run; a few short requests (one
# prompt longer than index_topk 64, so the indexer selects)
cat > "$work/req.jsonl" <<'EOF'
{"prompt_len": 150, "max_tokens": 6}
{"prompt_len": 40, "max_tokens": 6}
{"prompt_len": 3, "max_tokens": 6}
{"prompt_len": 90, "max_tokens": 4, "arrive_ms": 30}
EOF
serve() { # DIR P N T
  local dir=$1 t0=$SECONDS
  out=$("$bin" run --model-dir "$dir" --pcp "$2" --dcp "$3" --tp "$4" --requests "$work/req.jsonl" \
    --verify --json --quiet) || fail "run --model-dir $dir ($2,$3,$4) exited $?: $out"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
v = d["verify"]
assert d["ok"] and d["requests"] == 4 and d["generated_tokens"] == 22, d
assert v["checked"] == 4 and v["mismatches"] == 0 and v["identical"] + v["ties"] == 4, v
toks = [t for r in d["results"] for t in r["tokens"]]
assert len(set(toks)) > len(toks) // 2, ("degenerate greedy tokens", toks)
' "$out" || fail "run --model-dir $dir ($2,$3,$4): $out"
  echo "mkmodel_cli: $(basename "$dir") ($2,$3,$4) verified in $((SECONDS - t0)) s"
}
serve "$work/fp8" 1 1 1
serve "$work/fp8" 2 2 1
serve "$work/fp8" 4 4 1
serve "$work/fp8" 2 2 2
serve "$work/bf16" 2 2 2
serve "$work/one" 2 2 1

# refusals: exit 2, the reason, nothing written
refused() { # WANT DIR ARGS...
  local want=$1 dir=$2; shift 2
  msg=$("$bin" mkmodel "$dir" "$@" 2>&1); rc=$?
  [ $rc -eq 2 ] || fail "mkmodel $dir $*: exit $rc, expected 2 ($msg)"
  echo "$msg" | grep -qF -- "$want" || fail "mkmodel $dir $*: '$msg' lacks '$want'"
}
before=$(ls -l --time-style=full-iso "$work/fp8")
refused "not empty" "$work/fp8"
refused "not empty" "$work/fp8/" --dtype bf16
[ "$(ls -l --time-style=full-iso "$work/fp8")" = "$before" ] || fail "an existing DIR was touched"
touch "$work/file"
refused "not a directory" "$work/file"
refused "experts = 6" "$work/x" --experts 6
refused "hidden = 100" "$work/x" --hidden 100
refused "dense layers = 5" "$work/x" --dense-layers 5
refused "layers = 0" "$work/x" --layers 0
refused "shards = 100" "$work/x" --shards 100
refused "--dtype must be fp8 or bf16" "$work/x" --dtype fp16
refused "--model-type must be deepseek_v32 or glm_moe_dsa" "$work/x" --model-type glm5
refused "--layers" "$work/x" --layers four
refused "beside" "$work/no/such/dir"
refused "usage" "$work/x" --frobnicate
refused "bad directory name" ""
[ -e "$work/x" ] && fail "a refused mkmodel wrote $work/x"
# an empty DIR is filled
mkdir "$work/empty"
mk "$work/empty" --layers 1 --dense-layers 0 --hidden 64 --vocab 256 --experts 8
[ -f "$work/empty/config.json" ] || fail "the empty DIR was not filled"

# a write that fails part-way (the file size limit: the first shard is larger) exits 1
# and leaves neither DIR nor its temporary sibling
msg=$( (ulimit -f 1000; trap '' XFSZ; "$bin" mkmodel "$work/big") 2>&1); rc=$?
[ $rc -eq 1 ] || fail "mkmodel over the file size limit: exit $rc, expected 1 ($msg)"
leftover=$(ls -d "$work"/big* 2>/dev/null)
[ -z "$leftover" ] || fail "a failed mkmodel left $leftover"
rm -rf "$work"
echo "mkmodel_cli: ok"
