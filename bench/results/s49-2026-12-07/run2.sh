#!/bin/bash
# run2.sh (session 49; prepared, not run): on main 665fe46 (session 48's pairs.patch
# merged in d6f7c20, the invariance cases' starts in twelves since), staged by build2.sh:
#  - .devrun/n = units.patch: units by the keys' format (four over bf16 keys, two over
#    fp8_index keys); the kernel of one token a unit with its pass count a constant
#    (pairs' one-token kernel took 225 us on the own-context bf16 decode, 220 before,
#    H200); the invariance cases against contexts of two and of four tokens a unit;
#  - .devrun/p = units-pipe.patch: units, and over bf16 keys two tokens of a unit scored
#    by interleaved wgmma chains (two accumulators; the shared-list fit of session 49's c1
#    gave ~0.74 us a scoring against ~0.13 us of tensor-core work: latency, if the
#    interleave pays);
#  - .devrun/x = units-tiles.patch: units-pipe, and one token a unit over bf16 keys (the
#    own-context decode) scored two tiles at a time by interleaved chains (five slots a
#    warpgroup, 146 registers; bench/long-context.md's sketch, session 49);
#  - .devrun/m = main.
# (P2 names part 2's builds, default "n p"; session 50 ran PART "1 2 4" P2=n: x holds p's
# code, so x's cases and memcheck cover p's too.)
# Call with carry [".devrun"] and PART "1 2 3" (~9 minutes; "1 2" ~6), then PART 4 (~3).
# Merge units if its cases and memcheck pass; pipe on top if its cases pass and the
# shared bf16 decode gains; tiles on top if its cases pass and the own-context bf16
# decode gains.
#  1. kernel.indexer of n, p, x and m in turn, twice;
#  2. test_gpu_kernels' indexer cases of n and p (the patches change no other kernel);
#  3. memcheck of p's indexer cases (p holds all of n's code but the scoring loop);
#  4. x's indexer cases and their memcheck.
. bench/device_common.sh
if has 1; then
  for r in 1 2; do
    indexer_env n units$r
    indexer_env p pipe$r
    indexer_env x tiles$r
    indexer_env m main$r
  done
  lap probes
fi
if has 2; then
  for b in ${P2:-n p}; do
    BIN=.devrun/$b indexer_tests
    mv "$OUT/test_indexer.log" "$OUT/test_indexer_$b.log"
  done
  lap tests
fi
if has 3; then
  BIN=.devrun/p MC_T=${MC_T:-200} memcheck_indexer
  lap memcheck
fi
if has 4; then
  BIN=.devrun/x indexer_tests
  mv "$OUT/test_indexer.log" "$OUT/test_indexer_x.log"
  [ -f "$OUT/memcheck-indexer.log" ] && mv "$OUT/memcheck-indexer.log" "$OUT/memcheck-indexer-p.log"
  BIN=.devrun/x MC_T=${MC_T:-200} memcheck_indexer
  lap tiles
fi
cd "$OUT" && tar czf all.tgz *.json *.log 2>/dev/null; rm -f *.json *.log
