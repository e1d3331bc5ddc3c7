#!/bin/bash
# run.sh - prepared in session 35, not run (the session's device time went to failed
# starts). On branch wip/arrive: `LINEINFO=1 bash bench/results/attn-persist-2026-12-06/stage.sh`
# (builds build/ and a -lineinfo kernel benchmark into .devrun), then with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/arrive-2026-12-06/run.sh
# (SHORT=1: without ncu, ~2 minutes).
# The consumers' release of the other block's slot in clusters (fp8_ds_mla rows), chosen
# by SPARSECP_WS_ARRIVE in one binary: 0 mbarrier.arrive.release.cluster by every
# thread (main; ncu of session 35's first call: 12% of the stall samples, stall_membar),
# 1 the default semantics (release at CTA scope, as CUTLASS's ClusterBarrier::arrive),
# 2 the same by lane 0 of each warp. The attention cases of 1, all of test_gpu_kernels of
# 2, memcheck and racecheck of 2's, kernel.sparse_attn alternating twice,
# FlashMLA, ncu of 2's fp8 decode (not with SHORT=1).
. bench/device_common.sh
SPARSECP_WS_ARRIVE=1 SC_GPU_CASES=attention timeout 60 .devrun/new/test_gpu_kernels > "$OUT/test_attention-a1.log" 2>&1
echo "attention cases arrive=1 rc=$? $(grep -c '^ok' "$OUT/test_attention-a1.log") ok"; grep -E "FAIL|not ok" "$OUT/test_attention-a1.log" | head -5
SPARSECP_WS_ARRIVE=2 timeout 150 .devrun/new/test_gpu_kernels > "$OUT/test_kernels-a2.log" 2>&1
echo "test_gpu_kernels arrive=2 rc=$? $(grep -c '^ok' "$OUT/test_kernels-a2.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels-a2.log" | head -5
SPARSECP_WS_ARRIVE=2 SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool memcheck .devrun/new/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1
echo "memcheck attention arrive=2 rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attention.log" | head -1)"
SPARSECP_WS_ARRIVE=2 SC_GPU_CASES=attention_roles timeout 150 compute-sanitizer --tool racecheck .devrun/new/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck roles arrive=2 rc=$? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck-roles.log" | head -2 | tr '\n' ' ')"
lap checks
attn_env_alternating SPARSECP_WS_ARRIVE "0 1 2" new fp8
lap kernels
flashmla_anchor
lap flashmla
[ -z "${SHORT:-}" ] && [ -x .devrun/li/gpu_bench_kernels ] && SPARSECP_WS_ARRIVE=2 ncu_attn fp8-a2 li decode _Z9k_attn_wsILb1ELb1E
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl *.csv.gz 2>/dev/null; rm -f *.log *.json *.err *.csv.gz
