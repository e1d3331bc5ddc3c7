#!/bin/bash
# run2.sh (session 55): where four ranks' decode step goes, by layout. The default model's
# decode TPOT (4 requests of 64 + 64 tokens 500 ms apart) at one rank over NCCL and at
# P x N x T in {2x1x1, 2x2x1, 4x1x1, 4x4x1, 1x1x4, 1x4x4} over ipc under MPS, binaries of .devrun/n
# (build1.sh), two rounds; every rank's device gap between steps (executor info line).
# P4 N1 repeats one rank's whole step on four ranks with one round a step (hidden
# restore): what four processes on the GPU cost without the DCP rounds; P1 T4 (tensor
# parallel: a quarter of the heads and FFN a rank, two all_reduces a layer) and P1 T4 N4
# are the other four-rank layouts. (Session 56: P1 N2 / P1 N4 as first written are
# refused, N must divide T when P = 1; replaced before the script ran.) Then P4 N4 n / m alternating three times
# (build3.sh's m: only rank 0 downloads the tokens). Call with carry [".devrun"] (~4 min).
# SCAN_ROUNDS (default 2) trims the scan. First run --verify at P2 N2 of m.
. bench/device_common.sh
BIN=.devrun/m verify_p2n2 # (m's ranks other than 0 no longer read their tokens)
requests 4 500 "$OUT/req4.jsonl"
for ((round = 1; round <= ${SCAN_ROUNDS:-2}; round++)); do
  SPARSECP_LOG=info timeout 60 .devrun/n/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
    --json --requests "$OUT/req4.jsonl" > "$OUT/one-$round.json" 2> "$OUT/one-$round.err"
  echo "one rank $round rc=$?"; show_run "$OUT/one-$round.json"
  grep -h "the device went" "$OUT/one-$round.err" | sed 's/^.*executor: //' | cut -c1-160
  for pn in "2 1 1" "2 2 1" "4 1 1" "4 4 1" "1 1 4" "1 4 4"; do
    set -- $pn
    f="$OUT/p$1n$2t$3-$round"
    SPARSECP_LOG=info timeout 60 .devrun/n/sparsecp run --device cuda --gpus 1 --pcp $1 --dcp $2 --tp $3 --mps on --clients 1 \
      --collectives ipc --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "P$1 N$2 T$3 $round rc=$?"; show_run "$f.json"
    grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-160
    grep -h "collectives .*calls" "$f.err" | grep "rank 0" | sed 's/^.*executor: //' | cut -c1-160
  done
done
lap scan
for round in 1 2 3; do for v in n m; do
  f="$OUT/ab-$v-$round"
  SPARSECP_LOG=info timeout 60 .devrun/$v/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 \
    --collectives ipc --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
  echo "P4 N4 $v $round rc=$?"; show_run "$f.json"
  grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-160
done; done
lap ab
cd "$OUT" && tar czf scan.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.jsonl *.err
