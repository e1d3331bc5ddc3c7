# run3.sh - session 33's third call. Binaries: .devrun/main (24b1382's gpu_bench_kernels),
# .devrun/new (run2's tree + WG1 waiting at PFREE too, ws_pfree: racecheck), .devrun/new2
# (new + bf16 rows copied by 8 lanes a row, 128 contiguous bytes a step; ncu in run2 put
# 33% excess shared wavefronts on the old copies). Racecheck and synccheck of new, its
# tests, kernel.sparse_attn of main / new / new2 alternating twice, FlashMLA.
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-cross-2026-12-05/run3.sh
. bench/device_common.sh
N=.devrun/new
SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck $N/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck attention_roles new rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-roles.log" | head -1)"
SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck .devrun/new2/test_gpu_kernels > "$OUT/racecheck-roles2.log" 2>&1
echo "racecheck attention_roles new2 rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-roles2.log" | head -1)"
SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool synccheck $N/test_gpu_kernels > "$OUT/synccheck-attention.log" 2>&1
echo "synccheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-attention.log" | head -1)"
for v in new new2; do
  SC_GPU_CASES=attention timeout 60 .devrun/$v/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
  echo "$v attention rc=$? $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"; grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head -5
done
lap checks
for i in 1 2; do for v in main new new2; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
  echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json" | grep -v "decode 256"
done; done
lap kernels
flashmla_anchor
lap flashmla
timeout 120 $N/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head -5
timeout 100 $N/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
timeout 100 $N/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --model "$OUT/m128.json" --verify > "$OUT/verify-m128-bf16.log" 2>&1
echo "verify P2 N2 bf16 m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-bf16.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap tests
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
