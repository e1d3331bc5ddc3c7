#!/usr/bin/env bash
# The command-line contract of `sparsecp plan` (DESIGN.md §7): JSON on success, exit 2
# and {"error": ...} on bad input, readable table without --json.
set -u
bin=$1
examples=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bin" plan --json < "$examples/batch-pcp2-dcp2.json") || fail "plan --json exited $?"
python3 - "$out" <<'PY' || fail "plan --json output does not follow the contract"
import json, sys
d = json.loads(sys.argv[1])
keys = {"ranks", "t_pad", "num_decode_tokens", "padded_gather_idx", "hidden_restore_idx",
        "kv_write_mask", "extents", "dcp_local_seq_lens", "chunks", "collectives",
        "fingerprint"}
assert set(d) == keys, set(d) ^ keys
assert len(d["padded_gather_idx"]) == 2 * d["t_pad"] == len(d["kv_write_mask"])
assert sorted(d["padded_gather_idx"][i] for i in d["hidden_restore_idx"]) == list(range(len(d["hidden_restore_idx"])))
assert all(set(c) == {"seq", "layer", "group", "op", "rows", "width", "purpose"} for c in d["collectives"])
assert d["collectives"][-1]["layer"] == -1 and len(d["fingerprint"]) == 16
PY

"$bin" plan --input "$examples/batch-pcp2-dcp2.json" | grep -q "fingerprint" || fail "table output"

for bad in '{' '{"config": {"pcp": 3, "dcp": 2}, "requests": [{"scheduled": 1, "prefill": true}]}' \
           '{"requests": []}' '{"requests": [{"scheduled": 1}]}'; do
  out=$(printf '%s' "$bad" | "$bin" plan --json); rc=$?
  [ $rc -eq 2 ] || fail "bad input '$bad' exited $rc, expected 2"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert list(d)==["error"] and d["error"]' "$out" \
    || fail "bad input '$bad' printed '$out'"
done
printf '{' | "$bin" plan 2>/dev/null; [ $? -eq 2 ] || fail "table mode bad input should exit 2"

"$bin" --help >/dev/null || fail "--help"
"$bin" plan --help | grep -q "usage: sparsecp plan" || fail "plan --help"
"$bin" bench --help | grep -q "usage: sparsecp bench" || fail "bench --help"
"$bin" nosuchcommand 2>/dev/null; [ $? -eq 2 ] || fail "unknown command should exit 2"
"$bin" plan --bogus 2>/dev/null; [ $? -eq 2 ] || fail "unknown option should exit 2"
"$bin" bench nosuchbench 2>/dev/null; [ $? -eq 2 ] || fail "unknown bench should exit 2"
"$bin" bench kernels --device tpu --quick >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench kernels --device tpu should exit 2"
# bench e2e --device cuda's format selection: refused before anything runs (no GPU needed)
"$bin" bench kernels --kv-format f32 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench kernels --kv-format should exit 2"
"$bin" bench e2e --kv-format f32 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench e2e --kv-format without --device cuda should exit 2"
"$bin" bench e2e --device cuda --kv-format f16 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench e2e --kv-format f16 should exit 2"
"$bin" bench e2e --device cuda --kv-format f32 --index-format fp8 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench e2e f32 rows with fp8 index keys should exit 2"
"$bin" bench e2e --device cuda --index-format e5m2 2>&1 >/dev/null | grep -q "index-format e5m2" || fail "bench e2e --index-format e5m2 names the value"
"$bin" bench e2e --device cuda --gemm-precision f16 2>&1 >/dev/null | grep -q "gemm-precision f16" || fail "bench e2e --gemm-precision f16 names the value"
"$bin" bench e2e --kv-format fp8_ds_mla --index-format kv --device cuda >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench e2e fp8_ds_mla rows with their keys in them should exit 2"
# TF32 gemms are the GPU's: refused on the CPU (the f32 reference) before anything starts
"$bin" run --gemm-precision tf32 2>&1 >/dev/null | grep -q "needs --device cuda" || fail "run --gemm-precision tf32 on the CPU should be refused"
SC_BENCH_MESSAGES_ONLY=carrier-pigeon "$bin" bench messages --quick >/dev/null 2>&1
[ $? -eq 2 ] || fail "SC_BENCH_MESSAGES_ONLY naming no transport should exit 2"
SC_BENCH_MESSAGES_SPIN_US=100001 "$bin" bench messages --quick >/dev/null 2>&1
[ $? -eq 2 ] || fail "SC_BENCH_MESSAGES_SPIN_US out of [0, 100000] should exit 2"
"$bin" bench plan --quick --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["bench"] == "plan" and d["machine"] and d["date"]
names = {r["name"] for r in d["results"]}
assert names == {"plan.compact", "plan.index"}, names
for r in d["results"]:
    assert {"name", "params", "unit", "median", "min", "max", "runs"} <= set(r)
    assert r["min"] <= r["median"] <= r["max"] and r["median"] > 0
    assert {"pcp", "dcp", "decodes", "prefills", "prefill_len"} <= set(r["params"])
' || fail "bench plan --json"
echo "plan_cli: all checks passed"
