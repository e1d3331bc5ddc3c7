#!/bin/bash
# run2.sh (session 49): units.patch (session 48's pairs.patch with the units by the keys'
# format, four over bf16 keys and two over fp8_index keys, the kernel of one token a unit
# with its pass count a constant, and the invariance cases' starts in twelves so that
# units of four also take tokens together) in .devrun/n against main's .devrun/m.
#  1. kernel.indexer of n and m alternating, twice;
#  2. test_gpu_kernels' indexer cases (n; the patch changes no other kernel);
#  3. memcheck of n's indexer cases.
. bench/device_common.sh
if has 1; then
  for r in 1 2; do
    indexer_env n new$r
    indexer_env m main$r
  done
  lap probes
fi
if has 2; then
  BIN=.devrun/n indexer_tests
  lap tests
fi
if has 3; then
  BIN=.devrun/n MC_T=${MC_T:-200} memcheck_indexer
  lap memcheck
fi
cd "$OUT" && tar czf all.tgz *.json *.log 2>/dev/null; rm -f *.json *.log
