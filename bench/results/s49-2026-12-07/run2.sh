#!/bin/bash
# run2.sh (session 49; prepared, not run): units.patch (on main d6f7c20, which merged
# session 48's pairs.patch: the units by the keys' format, four over bf16 keys and two
# over fp8_index keys; the kernel of one token a unit with its pass count a constant; the
# invariance cases' starts in twelves, so that units of four also take tokens together,
# and their runs on other contexts in one helper) in .devrun/n against main's .devrun/m,
# both staged by build2.sh. Call with carry [".devrun"] and PART "1 2 3" (~6 minutes;
# "1 2" ~3.5). Merge if the cases and memcheck pass; the constant pass count is for the
# own-context decode over bf16 keys, 225 us with pairs against 220 before them (H200).
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
