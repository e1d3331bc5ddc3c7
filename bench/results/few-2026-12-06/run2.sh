#!/bin/bash
# run2.sh - session 43's second call: test_gpu_kernels' indexer invariance cases (with
# the fused tile against a context without it, SPARSECP_INDEXER_FEW=0); ncu with source
# counters of the full pass (k_idx_tc<64, bf16, vec>, the second launch of the bf16
# 32k prompt's first op) of .devrun/fprof (the working tree with -lineinfo); then
# session 42's prepared call (next-2026-12-10/run.sh: the dense decode path's profile).
. bench/device_common.sh
SC_GPU_CASES=indexer_invariance timeout 200 .devrun/new/test_gpu_kernels > "$OUT/test_invariance.log" 2>&1
echo "test_gpu_kernels invariance rc=$? $(grep -c '^ok' "$OUT/test_invariance.log") ok"; grep -E "FAIL|not ok|fused" "$OUT/test_invariance.log" | cut -c1-200 | head -20
lap tests
SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt NCU_SKIP=1 ncu_src fullpass fprof '_Z8k_idx_tcILi64ELi1ELb1ELb0E'
lap ncu
cd "$OUT" && tar czf all-few.tgz *.log *.txt *.csv.gz 2>/dev/null; rm -f *.log ncu-*.txt; cd - > /dev/null
bash bench/results/next-2026-12-10/run.sh
