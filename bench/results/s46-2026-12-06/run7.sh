#!/bin/bash
# run7.sh (session 46, call A; build6.sh of session 45 and build7.sh stage it):
# .devrun/csel = main + csel.patch (a token's radix select in one cluster of 8 blocks,
# k_rsel_cluster; SPARSECP_TOPK_CLUSTER=0 gives the select a launch a pass in the same
# binary); .devrun/next = main + groups4.patch (session 45's prepared group rule, floors
# up to S = 128, cut bins by the group); .devrun/unif = main. Parts, in order of what
# matters most (a call cut short keeps the first):
#  1. csel's indexer cases (every case's tokens also on a context with the passes, and
#     three cases with positions up to 153k: several blocks' windows);
#  2. kernel.indexer's one-token decode shapes (32k and 128k keys), csel against
#     SPARSECP_TOPK_CLUSTER=0, alternating three times;
#  3. csel: run --verify P2 N2 with model-long and two 8k prompts (decode steps whose
#     select takes clusters), and compute-sanitizer memcheck of its indexer cases;
#  4. next's indexer cases;
#  5. kernel.indexer next / next with SPARSECP_INDEXER_GROUP=2 / unif, then next and
#     unif again; PyTorch's 64-head indexer (bench/indexer_ref.py --only h64);
#  6. next: run --verify P2 N2 (the default model, f32 and bf16 rows).
. bench/device_common.sh
if has 1; then
  BIN=.devrun/csel indexer_tests
  grep -h "spread=17" "$OUT/test_indexer.log" | cut -c1-220
  mv "$OUT/test_indexer.log" "$OUT/test_indexer_csel.log"
  lap csel-cases
fi
if has 2; then
  for i in 1 2 3; do
    SC_BENCH_INDEXER_TOKENS=1 indexer_env csel csel-$i
    SC_BENCH_INDEXER_TOKENS=1 indexer_env csel pass-$i SPARSECP_TOPK_CLUSTER=0
  done
  lap csel-bench
fi
if has 3; then
  BIN=.devrun/csel verify_long8k
  SC_GPU_CASES=indexer timeout ${MC_T:-150} compute-sanitizer --tool memcheck .devrun/csel/test_gpu_kernels > "$OUT/memcheck-csel.log" 2>&1
  echo "memcheck indexer csel rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-csel.log") $(grep -c '^ok' "$OUT/memcheck-csel.log") ok"
  lap csel-checks
fi
if has 4; then
  BIN=.devrun/next indexer_tests
  grep -h "heads=64 dim=128 topk=256 tokens=1100" "$OUT/test_indexer.log" | cut -c1-200
  lap next-cases
fi
if has 5; then
  indexer_env next next-1; indexer_env next g2-1 SPARSECP_INDEXER_GROUP=2; indexer_env unif unif-1
  indexer_env next next-2; indexer_env unif unif-2
  timeout 150 /opt/torch/.venv/bin/python3 bench/indexer_ref.py --only h64 > "$OUT/torch-anchor.jsonl" 2>&1
  echo "PyTorch anchor rc=$?"; grep -E '"H": 64' "$OUT/torch-anchor.jsonl" | cut -c1-200
  lap indexer
fi
if has 6; then
  BIN=.devrun/next verify_p2n2
  lap verify
fi
cd "$OUT" && tar czf all7.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
