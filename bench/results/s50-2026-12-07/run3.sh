#!/bin/bash
# run3.sh (session 50): issue 18's state with a merge candidate, on the warm machine right
# after ../s49-2026-12-07/run2.sh (staged by its build2.sh with FULL="n x": .devrun/n =
# units.patch, .devrun/x = units-tiles.patch, each with sparsecp and every GPU test).
# S names the side (default x). Call with carry [".devrun"] (~6-7 minutes):
#  1. PyTorch's indexer + top-K, then kernel.indexer of S twice (the ratios of one run);
#  2. bench e2e --device cuda over bf16 rows (TTFT 32k / 128k, TPOT 64 / 32k / 128k);
#  3. every GPU test of S (test_gpu_kernels whole, graphs, nccl, ipc under MPS) and
#     run --verify at P2 N2 (f32, bf16) and with model-long's two 8k prompts.
. bench/device_common.sh
S=${S:-x}
if has 1; then
  torch_indexer
  for r in 1 2; do indexer_env "$S" "$S$r"; done
  lap indexer
fi
if has 2; then
  timeout 200 .devrun/$S/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-bf16.json" 2> "$OUT/bench-e2e-bf16.err"
  echo "e2e bf16 rc=$?"; show_e2e "$OUT/bench-e2e-bf16.json"
  lap e2e
fi
if has 3; then
  timeout 300 .devrun/$S/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
  echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head
  # (n carries no other GPU tests: the carry limit; they do not run the patched kernels)
  [ -x .devrun/$S/test_gpu_nccl ] && other_gpu_tests .devrun/$S
  BIN=.devrun/$S verify_p2n2
  BIN=.devrun/$S verify_long8k
  lap checks
fi
cd "$OUT" && tar czf state.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
