#!/bin/bash
# run5.sh - prepared for session 44 (session 43's device time ran out before it could
# start; build5.sh stages it). PART 1 (the default): the checks of session 43's tree its
# calls did not run (c3 ran its indexer cases): run --verify at P2 N2 over f32 and bf16
# rows (the default model: 4 index heads, the fused tile) and of model-long with two 8k
# prompts (the floors and the fused tile on both sides), test_gpu_graphs,
# test_gpu_kernels, the indexer cases under memcheck. PART 2: cut-atomics.patch
# (.devrun/cutatom: team_cut_edge with one shared atomic a key, no __match_any_sync)
# against main, kernel.indexer alternating twice, and its indexer invariance cases.
# PART 3: every kernel of model-long's decode indexer over 128k keys, timed by ncu.
# PART 4: racecheck of the indexer invariance cases (slow: within 300 s, or cut).
. bench/device_common.sh
B=.devrun/new
if has 1; then
for fmt in "" "--kv-format bf16"; do
  timeout 100 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --verify $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 150 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
timeout 100 $B/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
timeout 300 $B/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
lap graphs
SC_GPU_CASES=indexer timeout 200 compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1
echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log") $(grep -c '^ok' "$OUT/memcheck-indexer.log") ok"
lap memcheck
fi
if has 2; then
  for i in 1 2; do for v in new cutatom; do
    SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/idx-$v-$i.json" 2> "$OUT/idx-$v-$i.err"
    echo "indexer $v $i rc=$?"; show_indexer "$OUT/idx-$v-$i.json"
  done; done
  SC_GPU_CASES=indexer_invariance timeout 60 .devrun/cutatom/test_gpu_kernels > "$OUT/test_inv_cutatom.log" 2>&1
  echo "cutatom invariance rc=$? $(grep -c '^ok' "$OUT/test_inv_cutatom.log") ok"; grep -E "FAIL|not ok" "$OUT/test_inv_cutatom.log" | head -5
  lap experiment
fi
if has 3; then # where model-long's decode token over 128k keys spends its ~47 us a layer (the
  # indexer is most of what a 128k context adds to a TPOT): every kernel of two ops, timed
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072 \
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 40 \
    --launch-count 24 .devrun/new/gpu_bench_kernels --json > "$OUT/ncu-decode128k.log" 2>&1
  echo "ncu decode 128k rc=$?"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration" "$OUT/ncu-decode128k.log" | cut -c1-100 | paste - - | head -24
  lap decode128k
fi
if has 4; then # the barrier session 43 took out of the scoring kernel's tile loop, under racecheck
  SC_GPU_CASES=indexer_invariance timeout 300 compute-sanitizer --tool racecheck .devrun/new/test_gpu_kernels > "$OUT/racecheck-indexer.log" 2>&1
  echo "racecheck indexer_invariance rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-indexer.log")"
  lap racecheck
fi
cd "$OUT" && tar czf all.tgz *.log *.json 2>/dev/null; rm -f *.log *.json *.err
