# call3.sh - the short call that session 32's device time left (run.sh's parts cut to
# what mattered most, most important first): synccheck of main's attention cases (the
# unaligned barrier), all of main's test_gpu_kernels, wip/bf16-cross's attention cases
# and kernel.sparse_attn beside main's, then run --verify of fp8_ds_mla rows at P2 N2
# (k_attn_ws's clusters in the pipeline). Same set-up as run.sh.
. bench/device_common.sh
B=.devrun/main NEW=.devrun/bx
SC_GPU_CASES=attention timeout 60 compute-sanitizer --tool synccheck $B/test_gpu_kernels > "$OUT/synccheck-attention.log" 2>&1
echo "synccheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-attention.log" | head -1)"
timeout 90 $B/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
SC_GPU_CASES=attention timeout 30 $NEW/test_gpu_kernels > "$OUT/test_attention_bx.log" 2>&1
echo "bx test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attention_bx.log") ok"
grep -E "FAIL|not ok" "$OUT/test_attention_bx.log" | cut -c1-200 | head
for i in 1 2; do for v in main bx; do
  d=$B; [ $v = bx ] && d=$NEW
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 30 $d/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
  echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
done; done
lap checks
sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
timeout ${VERIFY_S:-100} $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format fp8_ds_mla --model "$OUT/m128.json" --verify > "$OUT/verify-m128-fp8.log" 2>&1
echo "verify P2 N2 fp8_ds_mla m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-fp8.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
