#!/bin/bash
# run1.sh (session 58; .devrun/l by build1.sh, main, ~7 min): the decode
# attention's LSE merge in one ipc round. test_gpu_ipc under MPS (its new LSE case: one
# round against the gather, lse_scale and reduction, bit for bit), run --verify over ipc
# at P4 N4 (the all_reduce form) and P1 N4 T4 (the reduce_scatter form), then the default
# model's TPOT at P4 N4 over ipc with SPARSECP_IPC_LSE_ROUND 1 and 0 in one binary and one
# rank beside them, three rounds; P1 N4 T4 both ways once; P4 N4 profiled both ways
# (rank_step_medians: stages and CUPTI busy time a rank). Last, all of test_gpu_kernels
# and test_gpu_graphs (main's ca4865a has not run on a GPU) and verify P2 N2 over NCCL.
. bench/device_common.sh
B=.devrun/l
export SPARSECP_IPC_LSE_ROUND=1 # (off by default until this call; four() sets it per run)
ipc_test_mps $B/test_gpu_ipc | tail -8
lap ipc
for l in "4 4 1" "1 4 4"; do
  set -- $l
  timeout 150 $B/sparsecp run --device cuda --gpus 1 --pcp $1 --dcp $2 --tp $3 --mps on --collectives ipc \
    --verify > "$OUT/verify-$1$2$3.log" 2>&1
  echo "verify P$1 N$2 T$3 ipc rc=$? $(grep -E 'verify' "$OUT/verify-$1$2$3.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
lap verify
requests 4 500 "$OUT/req4.jsonl"
four() { # P N T LSE_ROUND TAG
  SPARSECP_IPC_LSE_ROUND=$4 SPARSECP_LOG=info timeout 60 $B/sparsecp run --device cuda --gpus 1 --pcp $1 --dcp $2 --tp $3 \
    --mps on --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/$5.json" 2> "$OUT/$5.err"
  echo "P$1 N$2 T$3 lse_round=$4 rc=$?"; show_run "$OUT/$5.json"
}
for r in 1 2 3; do
  four 4 4 1 1 p4-one-$r
  four 4 4 1 0 p4-two-$r
  SPARSECP_LOG=info timeout 60 $B/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --collectives nccl \
    --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/one-$r.json" 2> "$OUT/one-$r.err"
  echo "one rank $r rc=$?"; show_run "$OUT/one-$r.json"
done
four 1 4 4 1 t4-one
four 1 4 4 0 t4-two
lap four
for v in 1 0; do # where the step goes with one round and with two (profiled: steps one at a time)
  SPARSECP_IPC_LSE_ROUND=$v SPARSECP_LOG=info timeout 90 $B/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 \
    --mps on --clients 1 --json --requests "$OUT/req4.jsonl" --collectives ipc --profile > "$OUT/prof-$v.json" 2> "$OUT/prof-$v.err"
  echo "P4 N4 profiled, lse_round=$v rc=$?"; show_run "$OUT/prof-$v.json"; rank_step_medians "$OUT/prof-$v.err"
done
lap profile
BIN=$B kernel_tests_all
timeout 150 $B/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
BIN=$B verify_p2n2
lap tests
cd "$OUT" && tar czf state.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
