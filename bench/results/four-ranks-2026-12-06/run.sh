#!/bin/bash
# run.sh - issue 20's four ranks on one GPU with main's binaries (session 37; binaries:
# bench/results/state-2026-12-06/build.sh, .devrun/main): the default model, 4 requests
# of 64 + 64 tokens 500 ms apart, P4 N4 over ipc under MPS (graphs, overlapped steps)
# and one rank (NCCL) in turn, ROUNDS times (default 4); then run --verify of P4 N4 over
# ipc. With carry [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
for ((round = 1; round <= ${ROUNDS:-4}; round++)); do
  f="$OUT/p4-$round"
  SPARSECP_LOG=info timeout 150 .devrun/main/sparsecp run $p4 > "$f.json" 2> "$f.err"
  echo "P4 N4 ipc $round rc=$?"; show_run "$f.json"
  tpot_alternating 1 main "$OUT/req4.jsonl"
  mv "$OUT/one-main-1.json" "$OUT/one-r$round.json"; mv "$OUT/one-main-1.err" "$OUT/one-r$round.err"
done
lap tpot
timeout 150 .devrun/main/sparsecp run --device cuda --pcp 4 --dcp 4 --collectives ipc --mps on --verify > "$OUT/verify-p4.log" 2>&1
echo "verify P4 N4 ipc rc=$? $(grep -E 'verify' "$OUT/verify-p4.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
cd "$OUT" && tar czf all.tgz *.txt *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.log *.json *.err *.jsonl
