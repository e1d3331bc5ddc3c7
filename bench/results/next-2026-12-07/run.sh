#!/bin/bash
# Ran in session 38 (2026-12-06 08:05 UTC, H100): call1/ (bench/kernels-cuda.md, bench/gpu-step.md).
# run.sh - the next call, prepared in session 37 (binaries: build.sh; with carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh). ~4 minutes.
#  1. issue 19: pf2's attention cases and memcheck, kernel.sparse_attn of main and pf2
#     alternating twice, FlashMLA;
#  2. issue 20: test_gpu_ipc of gpuscope under MPS, then the default model's decode TPOT
#     (4 requests of 64 + 64 tokens 500 ms apart) at P4 N4 over ipc under MPS for main,
#     gpuscope and nosleep, and one rank (NCCL), three rounds; run --verify P4 N4 over
#     ipc with gpuscope's binary.
# Merge what wins: pf2 with its cases and memcheck clean; gpuscope with test_gpu_ipc
# passing and verify identical (then docs: backend_ipc.h's protocol names the scope).
. bench/device_common.sh
attention_cases pf2
attn_sanitize memcheck pf2
attn_alternating main pf2
flashmla_anchor
lap attention
ipc_test_mps .devrun/gpuscope/test_gpu_ipc
lap test_gpu_ipc
requests 4 500 "$OUT/req4.jsonl"
p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
  for v in main gpuscope nosleep; do
    f="$OUT/p4-$v-$round"
    SPARSECP_LOG=info timeout 150 .devrun/$v/sparsecp run $p4 > "$f.json" 2> "$f.err"
    echo "P4 N4 ipc $v $round rc=$?"; show_run "$f.json"
  done
  tpot_alternating 1 main "$OUT/req4.jsonl"
  mv "$OUT/one-main-1.json" "$OUT/one-r$round.json"; mv "$OUT/one-main-1.err" "$OUT/one-r$round.err"
done
lap tpot
timeout 150 .devrun/gpuscope/sparsecp run --device cuda --pcp 4 --dcp 4 --collectives ipc --mps on --verify > "$OUT/verify-p4-gpuscope.log" 2>&1
echo "verify P4 N4 ipc gpuscope rc=$? $(grep -E 'verify' "$OUT/verify-p4-gpuscope.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err *.jsonl
