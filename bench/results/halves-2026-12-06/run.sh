#!/bin/bash
# run.sh - session 37's validation of main with the half barriers (15225c0; binaries in
# .devrun/new, the tree before in .devrun/main: bench/results/next-2026-12-06/build.sh's
# main). With carry [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh
# - run --verify P2 N2 (model-deep's shape, 2 layers, bf16 rows), test_gpu_kernels whole,
#   test_gpu_graphs;
# - racecheck of the roles' cases, four times with per-hazard reports (which blocks meet
#   at sm.alpha: the call before reported a write-after-read there in 2 of 8 runs of
#   main and of halves alike, always in the clustered fp8 kernel), four times with
#   SPARSECP_ATTN_CROSS=0 (no clusters); memcheck of the attention cases;
# - kernel.sparse_attn of the tree before and main alternating, twice; FlashMLA;
# - bench e2e --device cuda --kv-format bf16 (issue 18's TTFT and TPOT ratio).
. bench/device_common.sh
attn_pipeline_checks .devrun/new
lap checks
for i in 1 2 3 4; do
  SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck --racecheck-report hazard \
    .devrun/new/test_gpu_kernels > "$OUT/rc-hazard-$i.log" 2>&1
  echo "racecheck hazard-report $i rc=$? $(grep -c 'Race\|hazard' "$OUT/rc-hazard-$i.log") lines $(grep -h SUMMARY "$OUT/rc-hazard-$i.log")"
done
grep -h -m12 -i "block\|thread" "$OUT"/rc-hazard-*.log | cut -c1-220 | head -24
for i in 1 2 3 4; do
  SPARSECP_ATTN_CROSS=0 SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck \
    .devrun/new/test_gpu_kernels > "$OUT/rc-nocross-$i.log" 2>&1
  echo "racecheck no clusters $i rc=$? $(grep -h SUMMARY "$OUT/rc-nocross-$i.log")"
done
attn_sanitize memcheck new
lap sanitizers
attn_alternating main new
lap kernels
flashmla_anchor
lap flashmla
timeout 150 .devrun/new/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-bf16.json" 2> "$OUT/bench-e2e-bf16.err"
echo "e2e bf16 rc=$?"; show_e2e "$OUT/bench-e2e-bf16.json"
lap e2e
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
