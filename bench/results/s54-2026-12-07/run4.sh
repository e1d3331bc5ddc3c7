#!/bin/bash
# run4.sh (session 54; prepared, not run: the session's device time ran out): a greedy
# request's token and margin from the device (pending/margins.patch: argmax_rows'
# margin, rank 0 downloading logits only for requests drawn at a temperature), staged by
# build4.sh: .devrun/n = HEAD + the patch, .devrun/f = HEAD.
# Call with carry [".devrun"] (~4 min): test_gpu_kernels' greedy and notify cases and
# test_gpu_graphs of n; run --verify at P2 N2 of n (f32 and bf16 rows); decode TPOT f / n
# alternating: the default model (4 requests 500 ms apart) three times, and with
# DeepSeek-V3.2's vocabulary (129280) 16 requests at once twice.
. bench/device_common.sh
SC_GPU_CASES=greedy timeout 100 .devrun/n/test_gpu_kernels > "$OUT/test_greedy.log" 2>&1; echo "greedy case rc=$?"; grep -E "ok|FAIL" "$OUT/test_greedy.log" | cut -c1-220 | head
SC_GPU_CASES=case_notify timeout 100 .devrun/n/test_gpu_kernels > "$OUT/test_notify.log" 2>&1; echo "notify cases rc=$?"; grep -E "ok|FAIL" "$OUT/test_notify.log" | cut -c1-200 | head
timeout 150 .devrun/n/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs n rc=$? $(tail -1 "$OUT/test_graphs.log")"
BIN=.devrun/n verify_p2n2
lap tests
requests 4 500 "$OUT/req4.jsonl"
tpot_alternating 3 "f n" "$OUT/req4.jsonl"
echo '{"vocab": 129280}' > "$OUT/mv.json"
requests 16 0 "$OUT/req16.jsonl"
for r in 1 2; do for v in f n; do
  SPARSECP_LOG=info timeout 100 .devrun/$v/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
    --model "$OUT/mv.json" --json --requests "$OUT/req16.jsonl" > "$OUT/v-$v-$r.json" 2> "$OUT/v-$v-$r.err"
  echo "vocab 129280 x16 $v $r rc=$?"; show_run "$OUT/v-$v-$r.json"
  grep -h "overlapped steps" "$OUT/v-$v-$r.err" | sed 's/^.*executor: //' | cut -c1-200
done; done
lap tpot
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
