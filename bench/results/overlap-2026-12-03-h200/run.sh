#!/bin/bash
# Overlapped steps (issue 20 item 3) on one H200: the tree of this session's overlap
# commit, from the repository root with the binaries in .devrun/.
#  PART=1: test_gpu_kernels (argmax_rows/take_tokens against the host's sc_logits_top2,
#    two notifies outstanding), test_gpu_graphs; decode TPOT of the default model,
#    model-small and model-deep, --overlap off against auto (on: CUDA, one rank),
#    alternating; the tokens of both compared; run --verify at P2 N2 (its one-rank
#    reference overlaps).
#  PART=2: after a helper's review (the readback's failure paths, the lead timed from the
#    completion callback's clock): the tests again; off / auto once each for the default
#    model (spaced and 4 at once) and model-small, one auto run of model-deep, for the
#    executor's lead line; bench e2e (its clusters overlap by default).
#  PART=3: validation of the session's final tree: the GPU tests (nccl too), recovery on
#    one-rank NCCL clusters (tests/gpu/recovery_gpu.sh parts 3 and 4: a device fault, and
#    a failed step whose step planned ahead fails with it, both run again), run --verify
#    at P2 N2, the default model overlapped, and four ranks sharing the GPU (P4 N4, host
#    collectives; they do not overlap) against it.
#  PART=4: bench e2e with its new baseline (e2e.tpot_one_at_a_time: overlap off).
#  PART=5: the radix select's later passes not launched when no token has more keys than
#    the top-K (.devrun, against .devrun/prev: the tree of 3ea8d16; tried, not kept, not
#    committed: a max_keys bound in sc_indexer_args, bench/gpu-step.md): test_gpu_kernels
#    (indexer_few_keys_case), the default model's and model-small's TPOT alternating
#    (overlap auto), run --verify at P2 N2.
#  PART=7: after the final read of the change (sched's failure callbacks merged, one
#    logits-row rule in the forward pass, the scheduler's result always held first):
#    the GPU tests, the default model overlapped, run --verify at P2 N2.
#  PART=6: where four ranks sharing the GPU spend a step (P4 N4, host collectives,
#    staged; default model, profiled): the executors' step lines and collective totals.
# (gpu_tests and verify_p2n2 were made functions after the calls, with the same commands,
# PART 5's verify then adding --kv-format f32, the default.)
. bench/device_common.sh

# tpot NAME MODEL_ARGS REQFILE CLIENTS [ROUNDS] [MODES]: overlap off / auto (MODES),
# alternating, ROUNDS times (2); each run's
# TPOT, its executor lines, and the tokens of every request compared between the modes
tpot() {
  for ((i = 1; i <= ${5:-2}; i++)); do for ov in ${6:-off auto}; do
    f="$OUT/$1-$ov-$i"
    SPARSECP_LOG=info timeout 120 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $2 --requests "$3" --clients $4 --overlap $ov --json > "$f.json" 2> "$f.err"
    echo "$1 overlap $ov $i rc=$?"; show_run "$f.json"; grep -E "steps, each|between|overlapped steps" "$f.err" | cut -c1-330
  done; done
  [ "${6:-off auto}" = "off auto" ] && python3 - "$OUT/$1" <<'PY'
import json, sys
t = {ov: [r.get("tokens") for r in json.load(open(f"{sys.argv[1]}-{ov}-1.json"))["results"]] for ov in ("off", "auto")}
print("  tokens identical with and without overlap:", t["off"] == t["auto"], sum(len(x or []) for x in t["auto"]), "tokens")
PY
  lap $1
}

# gpu_tests PATTERN: test_gpu_kernels (its lines matching PATTERN shown) and test_gpu_graphs
gpu_tests() {
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "$1" "$OUT/test_kernels.log" | head
  timeout 150 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
}
# verify_p2n2 FORMAT [NAME MODEL_ARGS]: run --verify at P2 N2, its verdict lines
verify_p2n2() {
  f="$OUT/verify-$1${2:+-$2}.log"
  timeout 90 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $1 --verify ${3:-} > "$f" 2>&1; echo "verify $1 ${2:-} rc=$? $(grep -E 'verify|result' "$f" | tr -s ' ' | tr '\n' ' ')"
}

if has 1; then
  gpu_tests "FAIL|greedy|notify"
  lap tests
  requests 4 500 "$OUT/req4.jsonl"
  requests 4 0 "$OUT/req4-together.jsonl"
  tpot default "" "$OUT/req4.jsonl" 1
  tpot default-batch4 "" "$OUT/req4-together.jsonl" 4
  tpot small "--model examples/model-small.json" "$OUT/req4.jsonl" 1
  requests 4 2500 "$OUT/req4-deep.jsonl"
  tpot deep "--model examples/model-deep.json" "$OUT/req4-deep.jsonl" 1
  for fmt in f32 bf16; do verify_p2n2 $fmt; done
  lap verify
fi

if has 2; then
  gpu_tests FAIL
  lap tests
  requests 4 500 "$OUT/req4.jsonl"
  requests 4 0 "$OUT/req4-together.jsonl"
  requests 4 2500 "$OUT/req4-deep.jsonl"
  tpot default "" "$OUT/req4.jsonl" 1 1
  tpot default-batch4 "" "$OUT/req4-together.jsonl" 4 1
  tpot small "--model examples/model-small.json" "$OUT/req4.jsonl" 1 1
  tpot deep "--model examples/model-deep.json" "$OUT/req4-deep.jsonl" 1 1 auto
  timeout 250 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"; show_e2e "$OUT/bench-e2e.json"; lap e2e
fi

if has 3; then
  gpu_tests FAIL
  timeout 150 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$? $(tail -1 "$OUT/test_nccl.log")"
  lap tests
  SC_ONLY_DEVFAULT=1 timeout 200 tests/gpu/recovery_gpu.sh > "$OUT/recovery.log" 2>&1; echo "recovery_gpu (3, 4) rc=$?"; grep -E "rc=|tokens|generation|again" "$OUT/recovery.log" | cut -c1-200
  grep -hE "steps [0-9]+ and [0-9]+ failed" "$OUT"/b.err "$OUT"/f.err | cut -c1-200 | head -3
  lap recovery
  for fmt in f32 bf16; do verify_p2n2 $fmt; done
  verify_p2n2 bf16 long "--model examples/model-long.json"
  lap verify
  requests 4 500 "$OUT/req4.jsonl"
  tpot default "" "$OUT/req4.jsonl" 1 1 auto
  timeout 150 .devrun/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/default-p4n4.json" 2> "$OUT/default-p4n4.err"; echo "P4 N4 rc=$?"; show_run "$OUT/default-p4n4.json"
  lap p4n4
fi

if has 4; then
  timeout 300 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"
  python3 - "$OUT/bench-e2e.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], p.get("context"), p.get("kv"), round(r["median"], 3), r["unit"], {k: v for k, v in r.items() if k.endswith("speedup") or k.startswith("ratio")})
PY
  lap e2e
fi

if has 5; then
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|bound" "$OUT/test_kernels.log" | head
  lap tests
  requests 4 500 "$OUT/req4.jsonl"
  for i in 1 2; do for v in prev cur; do for m in default small; do
    bin=.devrun/sparsecp; [ $v = prev ] && bin=.devrun/prev/sparsecp
    margs=""; [ $m = small ] && margs="--model examples/model-small.json"
    f="$OUT/$m-$v-$i"
    SPARSECP_LOG=info timeout 60 $bin run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $margs --requests "$OUT/req4.jsonl" --clients 1 --json > "$f.json" 2> "$f.err"
    echo "$m $v $i rc=$?"; show_run "$f.json"
  done; done; done
  python3 - "$OUT" <<'PY'
import json, sys
for m in ("default", "small"):
    t = {v: [r.get("tokens") for r in json.load(open(f"{sys.argv[1]}/{m}-{v}-1.json"))["results"]] for v in ("prev", "cur")}
    print(" ", m, "tokens identical before and after:", t["prev"] == t["cur"])
PY
  lap tpot
  verify_p2n2 f32
  lap verify
fi

if has 6; then
  requests 4 500 "$OUT/req4.jsonl"
  SPARSECP_LOG=info timeout 120 .devrun/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --profile --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/p4n4-prof.json" 2> "$OUT/p4n4-prof.err"; echo "P4 N4 profiled rc=$?"; show_run "$OUT/p4n4-prof.json"
  grep -E "rank 0: step (100|101|102):" "$OUT/p4n4-prof.err" | cut -c1-600
  grep -E "rank (0|5): step 101:" "$OUT/p4n4-prof.err" | cut -c1-600
  grep -E "rank 0 collectives|rank 0: [0-9]+ steps, each" "$OUT/p4n4-prof.err" | cut -c1-300
  lap p4n4
fi

if has 7; then
  gpu_tests FAIL
  lap tests
  requests 4 500 "$OUT/req4.jsonl"
  tpot default "" "$OUT/req4.jsonl" 1 1 auto
  verify_p2n2 f32
  verify_p2n2 bf16
  lap verify
fi
