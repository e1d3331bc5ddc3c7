# run.sh - session 33's first call: k_attn_ws with every 128-head model's token in a
# cluster of two blocks that read each row from L2 once (bf16 rows too), and the fp8
# cluster producer loading a whole row before converting (one load latency a tile, was
# two), against main (24b1382) in the same call. Binaries: .devrun/main (24b1382),
# .devrun/new (this change; SPARSECP_ATTN_CROSS=fp8 gives clusters over fp8 rows only,
# =0 none). From the repository root on the GPU machine:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-cross-2026-12-05/run.sh
. bench/device_common.sh
N=.devrun/new
for v in all fp8 0; do
  SPARSECP_ATTN_CROSS=$v SC_GPU_CASES=attention timeout 60 $N/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
  echo "new cross=$v attention rc=$? $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"
  grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head -5
done
lap tests
for i in 1 2; do for v in main new newfp8; do
  d=$N; e=all; [ $v = main ] && d=.devrun/main; [ $v = newfp8 ] && e=fp8
  SPARSECP_ATTN_CROSS=$e SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 $d/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
  echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
done; done
lap kernels
flashmla_anchor
lap flashmla
SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool synccheck $N/test_gpu_kernels > "$OUT/synccheck-attention.log" 2>&1
echo "synccheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-attention.log" | head -1)"
SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck $N/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck attention_roles rc=$? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck-roles.log" | head -2 | tr '\n' ' ')"
lap sanitizers
timeout 120 $N/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head -5
sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
for f in bf16 fp8_ds_mla; do
  timeout 100 $N/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $f --model "$OUT/m128.json" --verify > "$OUT/verify-m128-$f.log" 2>&1
  echo "verify P2 N2 $f m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-$f.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
lap pipeline
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
