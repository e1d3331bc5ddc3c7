#!/usr/bin/env bash
# bench/attn_anchor.py merge (issue 19): a recorded `bench kernels --device cuda` document
# and FlashMLA lines of known speed give each attention case its anchor and ratio (bf16
# decode against FlashMLA's fp8 decode of the same tokens), the gather its ratio to the
# same run's copy; cases without an anchor stay as they were; no FlashMLA case: exit 1.
set -u
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
kernels="$src/bench/results/kernels-cuda-2026-11-29-h200-s2-final.json"
cat > "$work/fm.jsonl" <<'J'
{"name": "flashmla.env", "torch": "x", "gpu": "y", "flash_mla": "1.0.0"}
{"name": "flashmla.decode", "phase": "decode", "kv": "fp8_ds_mla", "tokens": 128, "q_per_request": 1, "kv_rows": 2097152, "ms": 1.0, "tflops": 400.0}
{"name": "flashmla.decode", "phase": "decode", "kv": "fp8_ds_mla", "tokens": 256, "q_per_request": 2, "kv_rows": 2097152, "ms": 2.0, "tflops": 320.0}
{"name": "flashmla.prefill", "phase": "prefill", "kv": "bf16", "tokens": 2048, "q_per_request": 2048, "kv_rows": 65536, "ms": 9.0, "tflops": 500.0}
J
python3 "$src/bench/attn_anchor.py" merge "$kernels" "$work/fm.jsonl" > "$work/out.json" 2> "$work/err" ||
  fail "merge failed: $(cat "$work/err")"
python3 - "$kernels" "$work/out.json" <<'PY' || fail "the merged document is wrong"
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:3])
assert len(before["results"]) == len(after["results"])
want = {("decode", "fp8_ds_mla", 1): 400.0, ("decode", "bf16", 1): 400.0,
        ("decode", "fp8_ds_mla", 2): 320.0, ("decode", "bf16", 2): 320.0,
        ("prefill", "bf16", 2048): 500.0}
seen = 0
for r in after["results"]:
    p = r["params"]
    if r["name"].startswith("kernel.sparse_attn."):
        key = (r["name"].rsplit(".", 1)[1], p["kv"], p["q_per_request"])
        a = r.get("anchor")
        assert a is not None, key
        assert a["tflops"] == want[key], (key, a)
        assert abs(a["ratio"] - r["tflops"] / want[key]) < 1e-4, (key, a, r["tflops"])
        seen += 1
    elif r["name"] == "kernel.gather":
        copy = [c for c in after["results"] if c["name"] == "kernel.copy"][0]
        assert abs(r["ratio_to_copy"] - r["gbps"] / copy["gbps"]) < 1e-4
        seen += 1
    else:
        assert "anchor" not in r and "ratio_to_copy" not in r, r["name"]
assert seen == 6, seen
PY
grep -q "kernel.sparse_attn.decode fp8_ds_mla x1" "$work/err" || fail "no table: $(cat "$work/err")"
# nothing to compare with
head -1 "$work/fm.jsonl" > "$work/none.jsonl"
python3 "$src/bench/attn_anchor.py" merge "$kernels" "$work/none.jsonl" > /dev/null 2> "$work/err" &&
  fail "a merge without FlashMLA cases succeeded"
grep -q "no FlashMLA case to compare with" "$work/err" || fail "no reason given: $(cat "$work/err")"
# FlashMLA cases of other shapes only (nothing attached), and a line without names
echo '{"phase": "decode", "tokens": 7, "q_per_request": 1, "tflops": 9.0}' > "$work/other.jsonl"
python3 "$src/bench/attn_anchor.py" merge "$kernels" "$work/other.jsonl" > /dev/null 2> "$work/err" &&
  fail "a merge that attached nothing succeeded"
grep -q "no FlashMLA case to compare with (read 1)" "$work/err" || fail "$(cat "$work/err")"
exit 0
