#!/bin/bash
# run6.sh (session 45, call 3; prepared, not run: five starts got no machine and the
# device time ran out; build6.sh stages it): .devrun/next = main + groups4.patch: the
# group rule (a group pays while the step's groups give 7 of every 8 of two blocks an SM
# one) + floors up to S = 128 for tokens of many products + cut bins sized by the group (tc_hist_ints: 4 KB a
# block up to 4 tokens, so 4 tokens of 64 heads over bf16 keys fit two blocks an SM at
# one stage); .devrun/unif = main (d5b6104 or later: session 44's tree + unif.patch).
# ~5.5 minutes with PART="1 2 3 4" MC_T=100. Parts:
#  1. next's indexer cases (the floors cases now at S = 16) and run --verify P2 N2 (the
#     default model, f32 and bf16 rows);
#  2. kernel.indexer alternating twice: next, next with SPARSECP_INDEXER_FLOORS=64 (the
#     old floors rule), next with SPARSECP_INDEXER_GROUP=2 (groups of 2 at most, the old
#     group rule for 64 heads), unif; PyTorch's 64-head indexer for the ratios (main
#     from 48e5e8c on: kernel.indexer's decode_shared case and the anchor's decode_own, the two
#     like-for-like pairs of the decode shape);
#  3. compute-sanitizer memcheck of next's indexer cases;
#  4. bench e2e over bf16 rows with next's sparsecp (five rounds a case from d52b75b on:
#     TTFT 32k / 128k and the TPOT ratios).
. bench/device_common.sh
if has 1; then
  BIN=.devrun/next indexer_tests
  grep -h "heads=64 dim=128 topk=256 tokens=1100" "$OUT/test_indexer.log" | cut -c1-200
  BIN=.devrun/next verify_p2n2
  lap cases
fi
if has 2; then
  for i in 1 2; do
    indexer_env next next-$i; indexer_env next f64-$i SPARSECP_INDEXER_FLOORS=64
    indexer_env next g2-$i SPARSECP_INDEXER_GROUP=2; indexer_env unif unif-$i
  done
  timeout 150 /opt/torch/.venv/bin/python3 bench/indexer_ref.py --only h64 > "$OUT/torch-anchor.jsonl" 2>&1
  echo "PyTorch anchor rc=$?"; grep -E '"H": 64' "$OUT/torch-anchor.jsonl" | cut -c1-200
  lap indexer
fi
if has 3; then
  BIN=.devrun/next memcheck_indexer
  lap memcheck
fi
if has 4; then
  timeout 150 .devrun/next/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-next.json" 2> "$OUT/e2e-next.err"
  echo "e2e bf16 next rc=$?"; show_e2e "$OUT/e2e-next.json" | grep -v "launched\|one_at"
  lap e2e
fi
cd "$OUT" && tar czf all6.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
