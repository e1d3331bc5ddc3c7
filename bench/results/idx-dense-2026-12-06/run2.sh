#!/bin/bash
# run2.sh - session 42's second and third calls (~5 minutes), binaries in .devrun/new (main + the
# indexer's dense path, wip/idx-dense; SPARSECP_INDEXER_DENSE=0 gives the scoring
# kernel's path in the same binary):
#  1. kernel.indexer, the 64-head decode shape (128 tokens over 16384 keys), dense off
#     and on, alternating twice; PyTorch's indexer + top-K (bench/indexer_ref.py);
#  2. ncu durations of the op's kernels on the dense path (bf16 keys);
#  3. the indexer cases of test_gpu_kernels (the dense path's among them);
#  4. compute-sanitizer memcheck of the indexer cases.
. bench/device_common.sh
if has 1; then
  for r in 1 2; do for d in 0 1; do
    SPARSECP_INDEXER_DENSE=$d SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 100 \
      .devrun/new/gpu_bench_kernels --json > "$OUT/idx-d$d-$r.json" 2> "$OUT/idx-d$d-$r.err"
    echo "indexer dense=$d $r rc=$?"; show_indexer "$OUT/idx-d$d-$r.json"
  done; done
  timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
  cut -c1-200 "$OUT/torch-anchor.jsonl" | head -12
  lap indexer
fi
if has 2; then
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 200 \
    ncu --clock-control none -k regex:'k_idx|k_rsel|k_topk' --launch-skip 30 --launch-count 8 --section SpeedOfLight \
    .devrun/new/gpu_bench_kernels --json > "$OUT/ncu-dense.txt" 2>&1
  echo "ncu dense rc=$?"
  grep -E "k_idx|k_topk|Duration|DRAM Throughput|Memory Throughput" "$OUT/ncu-dense.txt" | cut -c1-150 | head -40
  lap ncu
fi
if has 3; then
  SC_GPU_CASES=indexer timeout 250 .devrun/new/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1
  echo "test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer.log" | cut -c1-200 | head -20
  grep -E "tokens=200" "$OUT/test_indexer.log" | cut -c1-200 | head -6
  lap tests
fi
if has 4; then
  SC_GPU_CASES=indexer timeout 280 compute-sanitizer --tool memcheck .devrun/new/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1
  echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log")"
  lap memcheck
fi
cd "$OUT" && tar czf all2.tgz *.log *.json *.txt *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err ncu-*.txt *.jsonl
