#!/bin/bash
# run2.sh (session 54): the notify callbacks off the compute stream
# (pending/notify-stream.patch, staged by build2.sh: .devrun = new, .devrun/f = HEAD).
# Call with carry [".devrun"]:
#  PART 1 (~4 min): the default model's decode TPOT at one rank (NCCL) f / new
#    alternating three times, P4 N4 over ipc under MPS f / new twice, model-small at one
#    rank f / new twice, bench e2e (bf16 rows) f / new once;
#  PART 2 (~5 min): test_gpu_graphs / nccl / ipc under MPS of new, run --verify at P2 N2
#    (f32 and bf16 rows) and over ipc under MPS (model-long's 8k prompts), and
#    tests/gpu/recovery_gpu.sh parts 3-5 (device faults: the callback on the notify
#    stream must still be called with the error) of new.
. bench/device_common.sh
if has 1; then
  requests 4 500 "$OUT/req4.jsonl"
  tpot_alternating 3 "f new" "$OUT/req4.jsonl"
  grep -h "overlapped steps" "$OUT"/one-*-1.err | sed 's/^.*executor: //' | cut -c1-200
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
  for round in 1 2; do for v in f new; do
    SPARSECP_LOG=info timeout 100 "$(bin_of sparsecp $v)" run $p4 > "$OUT/p4-$v-$round.json" 2> "$OUT/p4-$v-$round.err"
    echo "P4 N4 ipc $v $round rc=$?"; show_run "$OUT/p4-$v-$round.json"
  done; done
  for round in 1 2; do for v in f new; do
    SPARSECP_LOG=info timeout 100 "$(bin_of sparsecp $v)" run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
      --model examples/model-small.json --json --requests "$OUT/req4.jsonl" > "$OUT/small-$v-$round.json" 2> "$OUT/small-$v-$round.err"
    echo "model-small $v $round rc=$?"; show_run "$OUT/small-$v-$round.json"
  done; done
  lap tpot
  for v in f new; do
    timeout 120 "$(bin_of sparsecp $v)" bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v.json" 2> "$OUT/e2e-$v.err"
    echo "e2e $v rc=$?"; show_e2e "$OUT/e2e-$v.json" | grep -E "tpot |ttft"
  done
  lap e2e
  cd "$OUT" && tar czf tpot.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.err; cd - > /dev/null
fi
if has 2; then
  other_gpu_tests .devrun
  verify_p2n2
  verify_long8k_ipc
  lap tests
  SC_RECOVERY_PARTS="3 4 5" timeout 400 bash tests/gpu/recovery_gpu.sh > "$OUT/recovery.out" 2>&1
  echo "recovery_gpu 3-5 rc=$?"; grep -E "^==|rc=|ok|FAIL|fail" "$OUT/recovery.out" | head -30
  lap recovery
  cd "$OUT" && tar czf checks.tgz *.log *.out 2>/dev/null
fi
