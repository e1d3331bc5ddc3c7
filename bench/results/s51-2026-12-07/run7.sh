#!/bin/bash
# run7.sh (session 51): rank.patch, the radix select's ranks inside its cooperative
# launch (k_rsel_rank's kernel boundary gone when a step has few tokens) and its keys
# loaded four a thread at a time, against main 5d50313. Staged by build6.sh (.devrun/m:
# main, gpu_bench_kernels and sparsecp; .devrun/r: rank.patch, sparsecp and every GPU
# test). Call with carry [".devrun"] and PART "1 2 3" (~5.5 min), then PART "4 5":
#  1. r's test_gpu_kernels, all of it (the indexer cases compare the cooperative select's
#     picks, ranks included, with a launch a pass's, alone and together);
#  2. PyTorch's indexer, then kernel.indexer of m and r alternating twice (issue 18's
#     ratios from r; the one-token rows over 32k / 128k keys are the select's);
#  3. bench e2e over bf16 rows, m and r alternating twice (TPOT at 32k / 128k);
#  4. memcheck of r's indexer cases;
#  5. run --verify at P2 N2 of model-long's two 8k prompts over NCCL (decode steps over
#     8k keys take the radix select), and test_gpu_graphs (a recorded select).
. bench/device_common.sh
if has 1; then
  timeout 300 .devrun/r/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
  echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"
  grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head -30
  lap tests
fi
if has 2; then
  torch_indexer
  for r in 1 2; do
    indexer_env m main$r
    indexer_env r rank$r
  done
  lap probes
fi
if has 3; then
  for r in 1 2; do
    for side in m r; do
      timeout 100 .devrun/$side/sparsecp bench e2e --device cuda --kv-format bf16 --json \
        > "$OUT/e2e-$side$r.json" 2> "$OUT/e2e-$side$r.err"
      echo "e2e $side $r rc=$?"; show_e2e "$OUT/e2e-$side$r.json" | grep -E "tpot |ttft"
    done
  done
  lap e2e
fi
if has 4; then
  BIN=.devrun/r MC_T=${MC_T:-150} memcheck_indexer
  lap memcheck
fi
if has 5; then
  BIN=.devrun/r verify_long8k
  timeout 100 .devrun/r/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  lap checks
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
