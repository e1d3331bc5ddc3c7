#!/bin/bash
# run5.sh (session 54; prepared, not run: the session's device time ran out): the
# tokens' trip without logits (pending/device-draw.patch = margins.patch + the draws at a
# temperature on the device), staged by build5.sh: .devrun/n = HEAD + the patch,
# .devrun/f = HEAD. Call with carry [".devrun"] (~5 min):
#  - test_gpu_kernels' greedy, draw and notify cases of n (the device's margins and
#    draws against the host's, to the bit), test_gpu_graphs of n;
#  - run --verify at P2 N2 of n (f32 and bf16 rows; its sampled request is drawn on the
#    device in the overlapped clusters);
#  - decode TPOT f / n alternating: the default model's 4 requests 500 ms apart, greedy
#    (three rounds) and at temperature 1 (two rounds: f draws on the host and does not
#    plan them ahead, n draws on the device and does); DeepSeek-V3.2's vocabulary
#    (129280) with 16 requests at once, greedy and at temperature 1 (one round each).
. bench/device_common.sh
SC_GPU_CASES=greedy timeout 100 .devrun/n/test_gpu_kernels > "$OUT/test_greedy.log" 2>&1; echo "greedy case rc=$?"; grep -E "^ok|FAIL" "$OUT/test_greedy.log" | cut -c1-220 | head
SC_GPU_CASES=case_draw timeout 100 .devrun/n/test_gpu_kernels > "$OUT/test_draw.log" 2>&1; echo "draw case rc=$?"; grep -E "^ok|FAIL" "$OUT/test_draw.log" | cut -c1-220 | head
SC_GPU_CASES=case_notify timeout 100 .devrun/n/test_gpu_kernels > "$OUT/test_notify.log" 2>&1; echo "notify cases rc=$?"; grep -E "^ok|FAIL" "$OUT/test_notify.log" | cut -c1-200 | head
timeout 150 .devrun/n/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs n rc=$? $(tail -1 "$OUT/test_graphs.log")"
BIN=.devrun/n verify_p2n2
lap tests
requests 4 500 "$OUT/req4.jsonl"
tpot_alternating 3 "f n" "$OUT/req4.jsonl"
sed 's/"seed"/"temperature": 1.0, "seed"/' "$OUT/req4.jsonl" > "$OUT/req4hot.jsonl"
for r in 1 2; do for v in f n; do
  SPARSECP_LOG=info timeout 100 .devrun/$v/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
    --json --requests "$OUT/req4hot.jsonl" > "$OUT/hot-$v-$r.json" 2> "$OUT/hot-$v-$r.err"
  echo "temperature 1 $v $r rc=$?"; show_run "$OUT/hot-$v-$r.json"
done; done
echo '{"vocab": 129280}' > "$OUT/mv.json"
requests 16 0 "$OUT/req16.jsonl"
sed 's/"seed"/"temperature": 1.0, "seed"/' "$OUT/req16.jsonl" > "$OUT/req16hot.jsonl"
for q in req16 req16hot; do for v in f n; do
  SPARSECP_LOG=info timeout 100 .devrun/$v/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
    --model "$OUT/mv.json" --json --requests "$OUT/$q.jsonl" > "$OUT/v-$q-$v.json" 2> "$OUT/v-$q-$v.err"
  echo "vocab 129280 $q $v rc=$?"; show_run "$OUT/v-$q-$v.json"
  grep -h "overlapped steps" "$OUT/v-$q-$v.err" | sed 's/^.*executor: //' | cut -c1-200
done; done
lap tpot
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
