# run4.sh - session 34's second call (binaries: build4.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-cross-2026-12-05/run4.sh)
# The attention cases of p16 and ahead, memcheck of ahead's, then
# kernel.sparse_attn of main / p16 / ahead alternating twice, FlashMLA, ncu. (The
# whole of test_gpu_kernels left out: the device time left was short; SHORT=1 leaves out
# memcheck and ncu too.)
. bench/device_common.sh
attention_cases p16 ahead
[ -z "${SHORT:-}" ] && SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool memcheck .devrun/ahead/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1
echo "memcheck attention ahead rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attention.log" | head -1)"
lap checks
attn_alternating main p16 ahead
lap kernels
flashmla_anchor
lap flashmla
# ncu with source counters of ahead's fp8 decode in clusters
[ -z "${SHORT:-}" ] && ncu_attn fp8-ahead ahead decode _Z9k_attn_wsILb1ELb1E
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
