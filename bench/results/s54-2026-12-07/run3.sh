#!/bin/bash
# run3.sh (session 54): the logits' reads off the compute stream's bus time
# (pending/readback.patch) and its parts, staged by build3.sh. Call with carry
# [".devrun"] (~5 min): all of test_gpu_kernels of d (the notify cases, with the new
# one that a read queued behind a notify does not wait for its callback) and that case
# on o (the callback on the compute stream: it must fail), test_gpu_graphs of d, the
# default model's decode TPOT at one rank f / c / d alternating three times and
# model-small's twice, run --verify at P2 N2 of d, tests/gpu/recovery_gpu.sh parts 3-5
# of d.
. bench/device_common.sh
timeout 250 .devrun/d/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels d rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok|notify" "$OUT/test_kernels.log" | cut -c1-200 | head
SC_GPU_CASES=notify timeout 60 .devrun/o/test_gpu_kernels > "$OUT/test_notify_o.log" 2>&1; echo "test_gpu_kernels o (notify cases) rc=$?"; grep -E "ok|FAIL|waited" "$OUT/test_notify_o.log" | cut -c1-200 | head
timeout 150 .devrun/d/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs d rc=$? $(tail -1 "$OUT/test_graphs.log")"
lap tests
requests 4 500 "$OUT/req4.jsonl"
tpot_alternating 3 "f c d" "$OUT/req4.jsonl"
for round in 1 2; do for v in f c d; do
  SPARSECP_LOG=info timeout 100 .devrun/$v/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
    --model examples/model-small.json --json --requests "$OUT/req4.jsonl" > "$OUT/small-$v-$round.json" 2> "$OUT/small-$v-$round.err"
  echo "model-small $v $round rc=$?"; show_run "$OUT/small-$v-$round.json"
done; done
lap tpot
BIN=.devrun/d verify_p2n2
cp .devrun/d/sparsecp .devrun/sparsecp
SC_RECOVERY_PARTS="3 4 5" timeout 300 bash tests/gpu/recovery_gpu.sh > "$OUT/recovery.out" 2>&1
echo "recovery_gpu 3-5 rc=$?"; grep -E "^==|expected|identical" "$OUT/recovery.out" | head -20
lap checks
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.err *.log *.out 2>/dev/null; rm -f *.json *.jsonl *.err *.log *.out
