#!/bin/bash
# run1.sh (session 55), staged by build1.sh (.devrun/n = a0fe4fe + draw-gaps.patch,
# .devrun/f = a0fe4fe + gaps.patch). Call with carry [".devrun"] (~7 min):
#  - session 54's run5.sh: the device's margins and draws against the host's, to the bit
#    (test_gpu_kernels' greedy and draw cases), notify cases, test_gpu_graphs, run
#    --verify at P2 N2, TPOT f / n (greedy, temperature 1, vocab 129280 x 16 requests);
#  - test_gpu_kernels' case_stamps (the step stamps) of n;
#  - four ranks over ipc under MPS f / n twice, greedy and at temperature 1 (with the
#    draws on the device no rank downloads logits, and requests at a temperature are
#    planned ahead);
#  - every run's device gap between overlapped steps (the executors' new info line).
bash bench/results/s54-2026-12-07/run5.sh
. bench/device_common.sh
SC_GPU_CASES=case_stamps timeout 100 .devrun/n/test_gpu_kernels > "$OUT/test_stamps.log" 2>&1; echo "stamps case rc=$?"; grep -E "^ok|FAIL" "$OUT/test_stamps.log" | cut -c1-220 | head
requests 4 500 "$OUT/req4.jsonl"
sed 's/"seed"/"temperature": 1.0, "seed"/' "$OUT/req4.jsonl" > "$OUT/req4hot.jsonl"
for q in req4 req4hot; do
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/$q.jsonl --collectives ipc"
  for round in 1 2; do for v in f n; do
    SPARSECP_LOG=info timeout 100 .devrun/$v/sparsecp run $p4 > "$OUT/p4-$q-$v-$round.json" 2> "$OUT/p4-$q-$v-$round.err"
    echo "P4 N4 ipc $q $v $round rc=$?"; show_run "$OUT/p4-$q-$v-$round.json"
    grep -h "the device went" "$OUT/p4-$q-$v-$round.err" | sed 's/^.*executor: //' | cut -c1-200
  done; done
done
lap p4
echo "device gaps of run5's runs (one rank):"
(cd "$OUT" && mkdir -p r5 && tar xzf all.tgz -C r5 && for f in r5/*.err; do echo "$f: $(grep -h 'the device went' "$f" | sed 's/^.*executor: //' | cut -c1-200)"; done; rm -rf r5)
cd "$OUT" && tar czf p4.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
