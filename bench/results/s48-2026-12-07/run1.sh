#!/bin/bash
# run1.sh (session 48): the dense path's units of shared keys (two tokens of one key list
# scored from tiles loaded once, where the caller's keys_shared says tokens share their
# lists; SPARSECP_INDEXER_SHARE=4 four, =1 one).
# Prepared, not run (no device machine started after c1): build1.sh stages .devrun/p =
# main with pairs.patch, .devrun/m = main. Call with carry [".devrun"] and PART "1 2 3"
# (~2 minutes), then PART 4 on the same warm machine (~2.5 minutes).
#  1. the indexer cases of test_gpu_kernels (the new pairs cases among them);
#  2. kernel.indexer: p in pairs, in fours, one token a unit, and main, twice;
#  3. PyTorch's indexer (bench/indexer_ref.py) for the ratios of this call;
#  4. memcheck of the indexer cases.
. bench/device_common.sh
if has 1; then
  BIN=.devrun/p indexer_tests
  lap tests
fi
if has 2; then
  for r in 1 2; do
    indexer_env p pairs$r
    indexer_env p fours$r SPARSECP_INDEXER_SHARE=4
    indexer_env p ones$r SPARSECP_INDEXER_SHARE=1
    indexer_env m main$r
  done
  lap probes
fi
if has 3; then
  torch_indexer
  lap torch
fi
if has 4; then
  BIN=.devrun/p MC_T=${MC_T:-170} memcheck_indexer
  lap memcheck
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log 2>/dev/null; rm -f *.json *.jsonl *.log
