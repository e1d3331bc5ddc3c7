#!/bin/bash
# run3.sh (session 58; .devrun/l by build1.sh and .devrun/d by build2.sh, ~8 min): the
# parts of run1.sh and run2.sh that decide something, for a session that gets one call:
# test_gpu_ipc under MPS (the LSE round's case first of all), verify at P4 N4 over ipc
# with the round (l) and with the deferred weights (d), the four-rank TPOT with the round
# on and off and one rank, three rounds (l), and the deferred weights' memory and
# model-deep at P4 N4 (d). run1.sh's kernel and graph tests and profiles are left out.
. bench/device_common.sh
ipc_test_mps .devrun/l/test_gpu_ipc | tail -8
lap ipc
verify_p4_ipc l SPARSECP_IPC_LSE_ROUND=1
verify_p4_ipc d
lap verify
requests 4 500 "$OUT/req4.jsonl"
run4() { # BIN LSE_ROUND TAG
  env SPARSECP_IPC_LSE_ROUND=$2 SPARSECP_LOG=info timeout 60 .devrun/$1/sparsecp run --device cuda --gpus 1 --pcp 4 \
    --dcp 4 --mps on --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/$3.json" 2> "$OUT/$3.err"
  echo "P4 N4 $1 lse_round=$2 rc=$?"; show_run "$OUT/$3.json"
}
for r in 1 2 3; do
  run4 l 1 one-$r
  run4 l 0 two-$r
  SPARSECP_LOG=info timeout 60 .devrun/l/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --collectives nccl \
    --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/r1-$r.json" 2> "$OUT/r1-$r.err"
  echo "one rank $r rc=$?"; show_run "$OUT/r1-$r.json"
done
lap four
for v in l d; do echo "P4 N4 default model, $v:"; gpu_peak_mem run4 $v 0 mem-$v; done
deep_p4_ipc d 200
lap deep
cd "$OUT" && tar czf s58.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
