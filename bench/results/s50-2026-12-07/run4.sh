#!/bin/bash
# run4.sh (session 50; prepared, not run): coop.patch, the radix select's passes and
# gather in one cooperative launch (k_rsel_coop), against SPARSECP_TOPK_COOP=0 (a launch
# each, main's kernels) in the same binary. Staged by build4.sh (.devrun/c: main 969cd69
# + coop-chunks.patch, sparsecp and every GPU test): coop.patch and a knob,
# SPARSECP_INDEXER_CHUNKS, the most chunks of a token's key range (256 by default: a
# decode token over 128k keys takes 256 scoring blocks of 512 keys, ~20 us for 17 MB of
# bf16 keys by session 45's ncu; 512 asks whether more blocks in flight read them
# sooner, as 128 -> 256 did, 49.8 -> 45.7 us an op on an H200). Why coop: the 128k
# decode token's indexer op is ~48 us a layer, its select ~26 of them (eight launches,
# four finding the token done);
# issue 18's TPOT ratio at 128k spreads over 1.11-1.56 on an H100 (session 50, median
# 1.25). Call with carry [".devrun"] and PART "1 2 3" (~6 min), then PART "4 5" (~4 min):
#  1. test_gpu_kernels, all of it (each indexer invariance case's tokens also on a
#     context with SPARSECP_TOPK_COOP=0, alone and together: the same picks);
#  2. kernel.indexer, coop and a launch a pass alternating, three times (the one-token
#     decode rows over 32k / 128k keys are the select's; the others must not move), and
#     coop with SPARSECP_INDEXER_CHUNKS=512; PyTorch's indexer first;
#  3. bench e2e over bf16 rows, coop and not alternating, twice (TPOT at 128k: the graphs
#     record the cooperative launch);
#  4. memcheck of the indexer cases;
#  5. run --verify at P2 N2 with model-long's two 8k prompts (decode steps over 8k keys
#     take the radix select), over NCCL and over ipc under MPS (four processes' kernels
#     beside the cooperative grid), and the other GPU tests.
. bench/device_common.sh
B=.devrun/c
if has 1; then # (the whole binary: its indexer cases are ~200 of its ~210 s)
  timeout 300 $B/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
  echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"
  grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head -30
  lap tests
fi
if has 2; then
  torch_indexer # (issue 18's ratios from the call that may merge coop)
  for r in 1 2 3; do
    indexer_env c coop$r
    indexer_env c passes$r SPARSECP_TOPK_COOP=0
    indexer_env c chunks$r SPARSECP_INDEXER_CHUNKS=512
  done
  lap probes
fi
if has 3; then
  for r in 1 2; do
    for side in coop passes; do
      v=1; [ $side = passes ] && v=0
      SPARSECP_TOPK_COOP=$v timeout 100 $B/sparsecp bench e2e --device cuda --kv-format bf16 --json \
        > "$OUT/e2e-$side$r.json" 2> "$OUT/e2e-$side$r.err"
      echo "e2e $side $r rc=$?"; show_e2e "$OUT/e2e-$side$r.json" | grep -E "tpot |ttft"
    done
  done
  lap e2e
fi
if has 4; then
  BIN=$B MC_T=${MC_T:-220} memcheck_indexer
  lap memcheck
fi
if has 5; then
  BIN=$B verify_long8k
  timeout 150 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --mps on --collectives ipc \
    --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 \
    --max-model-len 8320 --num-blocks 1024 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long-ipc.log" 2>&1
  echo "verify P2 N2 ipc MPS model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long-ipc.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  other_gpu_tests $B
  lap checks
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
