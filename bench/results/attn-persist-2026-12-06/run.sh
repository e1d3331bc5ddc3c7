#!/bin/bash
# (Ran from branch wip/persist, whose k_attn_ws has SPARSECP_ATTN_PERSIST; kept as the
# record of that call, bench/kernels-cuda.md "session 35"; since rewritten with the
# helpers of bench/device_common.sh, same steps.)
# run.sh - session 35's call (binaries: stage.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-persist-2026-12-06/run.sh)
# k_attn_ws whose blocks take item after item (ws_work) against a block an item
# (SPARSECP_ATTN_PERSIST=0) in one binary: the attention cases, their memcheck and
# racecheck, kernel.sparse_attn alternating twice, FlashMLA, then the pipeline checks
# (run --verify P2 N2 bf16 on model-deep's shape, all of test_gpu_kernels and
# test_gpu_graphs). SHORT=1 leaves out racecheck and the pipeline checks.
. bench/device_common.sh
attention_cases new
SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool memcheck .devrun/new/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1
echo "memcheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attention.log" | head -1)"
[ -z "${SHORT:-}" ] && { SC_GPU_CASES=attention_roles timeout 150 compute-sanitizer --tool racecheck .devrun/new/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck roles rc=$? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck-roles.log" | head -2 | tr '\n' ' ')"; }
lap checks
attn_env_alternating SPARSECP_ATTN_PERSIST "1 0" new
lap kernels
flashmla_anchor
lap flashmla
[ -z "${SHORT:-}" ] && attn_pipeline_checks .devrun/new
lap pipeline
# ncu with source counters (.devrun/li: gpu_bench_kernels of this tree built with
# -lineinfo, stage.sh LINEINFO=1) of the fp8 decode in clusters: where its producer waits
[ -z "${SHORT:-}" ] && [ -x .devrun/li/gpu_bench_kernels ] && ncu_attn fp8-persist li decode _Z9k_attn_wsILb1ELb1E
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl *.csv.gz 2>/dev/null; rm -f *.log *.json *.err *.csv.gz
