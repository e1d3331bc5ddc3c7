#!/bin/bash
# call1/ (08:27 UTC, H100): pdl at 69c0cca, whose one-block round kernel lacked its PDL wait
# (the wait had gone into a device function by a mistake in editing): test_gpu_ipc and verify
# caught it. call2/: pdl at its fixed commit (wait only, through cuda_common.cuh).
# run.sh - session 38, issue 20 (binaries: build.sh; with carry [".devrun"]:
# export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh). ~5 minutes.
#  1. test_gpu_ipc of fused and pdl under MPS (rounds of one block and of several);
#  2. the default model's decode TPOT (4 requests of 64 + 64 tokens 500 ms apart) at
#     P4 N4 over ipc under MPS for main, fused and pdl, and one rank (NCCL, main), three
#     rounds; 3. run --verify at P4 N4 over ipc (fused, pdl) and P2 N2 (pdl), the
#     injections desync / devfault / kill at P2 N2 over ipc (pdl); 4. one profiled P4 N4
#     run each of main and pdl (the steps' stages).
. bench/device_common.sh
ipc_test_mps .devrun/fused/test_gpu_ipc
mv "$OUT/test_ipc_mps.log" "$OUT/test_ipc_mps-fused.log"
ipc_test_mps .devrun/pdl/test_gpu_ipc
lap test_gpu_ipc
requests 4 500 "$OUT/req4.jsonl"
p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
  for v in main fused pdl; do
    f="$OUT/p4-$v-$round"
    SPARSECP_LOG=info timeout 150 .devrun/$v/sparsecp run $p4 > "$f.json" 2> "$f.err"
    echo "P4 N4 ipc $v $round rc=$?"; show_run "$f.json"
  done
  tpot_alternating 1 main "$OUT/req4.jsonl"
  mv "$OUT/one-main-1.json" "$OUT/one-r$round.json"; mv "$OUT/one-main-1.err" "$OUT/one-r$round.err"
done
lap tpot
for v in fused pdl; do
  timeout 150 .devrun/$v/sparsecp run --device cuda --pcp 4 --dcp 4 --collectives ipc --mps on --verify > "$OUT/verify-p4-$v.log" 2>&1
  echo "verify P4 N4 ipc $v rc=$? $(grep -E 'verify' "$OUT/verify-p4-$v.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
timeout 150 .devrun/pdl/sparsecp run --device cuda --pcp 2 --dcp 2 --collectives ipc --mps on --verify > "$OUT/verify-p2-pdl.log" 2>&1
echo "verify P2 N2 ipc pdl rc=$? $(grep -E 'verify' "$OUT/verify-p2-pdl.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
for inj in desync:1:5 devfault:1:5 kill:1:5; do
  f="$OUT/inject-${inj%%:*}"
  timeout 150 .devrun/pdl/sparsecp run --device cuda --pcp 2 --dcp 2 --collectives ipc --mps on --inject $inj > "$f.log" 2>&1
  echo "inject $inj rc=$?"; grep -E "desync|abort|rebuil|recover|fail|finished" "$f.log" | head -6 | cut -c1-200
done
lap verify
for v in pdl; do
  SPARSECP_LOG=info timeout 150 .devrun/$v/sparsecp run $p4 --profile > "$OUT/prof-$v.json" 2> "$OUT/prof-$v.err"
  echo "profiled P4 N4 $v rc=$?"; show_run "$OUT/prof-$v.json"
done
lap profile
cd "$OUT" && tar czf all.tgz *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err *.jsonl
