#!/bin/bash
# run13.sh (session 57, for the next call): main's state after session 57 (.devrun/m by
# build13.sh): all of test_gpu_kernels (the top-K merge's width threshold, ca4865a, has not
# run on a GPU), test_gpu_graphs, test_gpu_ipc under MPS, run --verify at P2 N2 (NCCL)
# and at P4 N4 over ipc; then issue 20's four ranks: the default model at P4 N4 over ipc
# against one rank, three rounds (on an H200 this is the issue's own machine) (~5 min).
. bench/device_common.sh
BIN=.devrun/m kernel_tests_all
timeout 150 .devrun/m/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
ipc_test_mps .devrun/m/test_gpu_ipc | tail -4
lap tests
BIN=.devrun/m verify_p2n2
timeout 150 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --collectives ipc \
  --verify > "$OUT/verify-p4.log" 2>&1
echo "verify P4 N4 ipc rc=$? $(grep -E 'verify' "$OUT/verify-p4.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
requests 4 500 "$OUT/req4.jsonl"
for r in 1 2 3; do
  SPARSECP_LOG=info timeout 60 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
    --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/p4-$r.json" 2> "$OUT/p4-$r.err"
  echo "P4 N4 $r rc=$?"; show_run "$OUT/p4-$r.json"
  SPARSECP_LOG=info timeout 60 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --collectives nccl \
    --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/one-$r.json" 2> "$OUT/one-$r.err"
  echo "one rank $r rc=$?"; show_run "$OUT/one-$r.json"
done
lap four
cd "$OUT" && tar czf state.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
