#!/bin/bash
# run10.sh (session 57): one copy of the weights for the ranks of one GPU (.devrun/s:
# main 676b4c2 + the shared weights of actors/rank_ctx.c, uncommitted when staged): the
# default model's decode at P4 N4 over ipc under MPS with SPARSECP_SHARED_WEIGHTS=1
# (default) and =0 (each rank its own copy) in the same binary, then one rank over NCCL,
# three rounds (4 requests of 64 + 64 tokens 500 ms apart); run --verify at P4 N4 over ipc
# with the weights shared, and the ranks' log lines saying whose weights they read;
# test_gpu_ipc under MPS (with the region's note and the memory it names) (~3 min).
. bench/device_common.sh
[ -s "$OUT/req4.jsonl" ] || requests 4 500 "$OUT/req4.jsonl"
for round in 1 2 3; do
  for sw in 1 0; do
    f="$OUT/s-p4-sw$sw-$round"
    SPARSECP_SHARED_WEIGHTS=$sw SPARSECP_LOG=info timeout 60 .devrun/s/sparsecp run --device cuda --gpus 1 \
      --pcp 4 --dcp 4 --mps on --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "P4 N4 shared=$sw $round rc=$?"; show_run "$f.json"
    [ "$round" = 1 ] && grep -h "weights" "$f.err" | sed 's/^.*rank: //' | cut -c1-150 | head -5
  done
  f="$OUT/s-one-$round"
  SPARSECP_LOG=info timeout 60 .devrun/s/sparsecp run --device cuda --gpus 1 --collectives nccl \
    --pcp 1 --dcp 1 --clients 1 --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
  echo "one rank $round rc=$?"; show_run "$f.json"
done
lap shared
timeout 150 .devrun/s/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --collectives ipc \
  --verify > "$OUT/verify-s-p4.log" 2>&1
echo "verify P4 N4 ipc shared rc=$? $(grep -E 'verify' "$OUT/verify-s-p4.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
BIN=.devrun/s verify_p2n2 --mps on --collectives ipc
lap verify
ipc_test_mps .devrun/s/test_gpu_ipc | tail -4
lap ipc
cd "$OUT" && tar czf shared.tgz s-*.json s-*.err verify*.log test_ipc_mps.log 2>/dev/null; rm -f s-*.json s-*.err verify*.log test_ipc_mps.log
