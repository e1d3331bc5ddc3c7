# call3.sh - the next call (session 32's device time ran out before it; most important
# first): synccheck of main's attention cases (the unaligned barrier of fcc5c62),
# racecheck of its short warpgroup-role cases (case_attention_roles), all of
# main's test_gpu_kernels, the attention cases of each branch in $VARIANTS and
# kernel.sparse_attn of main and each branch alternating, twice (with prefill_l2, the
# prefill over rows that stay in L2), FlashMLA on the same shapes, then run --verify at P2
# N2 over the 2-layer model of model-deep's shape: fp8_ds_mla rows on main (k_attn_ws's
# clusters in the pipeline) and bf16 rows on bx (its clusters). Same set-up as run.sh;
# binaries in .devrun/main and .devrun/<variant>:
#   c1  wip/cross-1lat: fp8 rows in clusters, a producer thread's whole row loaded before
#       any part is converted (one load latency a tile where the halves paid two)
#   bx  wip/bf16-cross: c1 + bf16 rows in clusters too (whole rows through registers)
#   l2  wip/l2-ahead: main + the producer's bulk L2 prefetch of the next tile's rows
#       before it waits for this tile's slot
. bench/device_common.sh
B=.devrun/main
VARIANTS=${VARIANTS:-c1 bx l2}
SC_GPU_CASES=attention timeout 60 compute-sanitizer --tool synccheck $B/test_gpu_kernels > "$OUT/synccheck-attention.log" 2>&1
echo "synccheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-attention.log" | head -1)"
SC_GPU_CASES=attention_roles timeout 90 compute-sanitizer --tool racecheck $B/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck attention_roles rc=$? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck-roles.log" | head -2 | tr '\n' ' ')"
timeout 90 $B/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
ok_variants=""
for v in $VARIANTS; do
  SC_GPU_CASES=attention timeout 30 .devrun/$v/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
  rc=$?; echo "$v test_gpu_kernels attention rc=$rc $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"
  grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head
  [ $rc = 0 ] && ok_variants="$ok_variants $v"
done
for i in 1 2; do for v in main $ok_variants; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 30 .devrun/$v/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
  echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
done; done
lap checks
flashmla_anchor # (with the L2-resident prefill: bench kernels' prefill_l2)
lap flashmla
sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
timeout ${VERIFY_S:-100} $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format fp8_ds_mla --model "$OUT/m128.json" --verify > "$OUT/verify-m128-fp8.log" 2>&1
echo "verify P2 N2 fp8_ds_mla m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-fp8.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
if [[ " $ok_variants " == *" bx "* ]]; then
  timeout ${VERIFY_S:-100} .devrun/bx/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --model "$OUT/m128.json" --verify > "$OUT/verify-m128-bx.log" 2>&1
  echo "bx verify P2 N2 bf16 m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-bx.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
fi
lap verify
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
