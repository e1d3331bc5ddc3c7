# run.sh - main's attention after the merges of session 32 (k_attn_ws in clusters over
# fp8_ds_mla rows, k_attn_pairs removed, ws_load_q's barrier unaligned; k_attn_few's
# batched loads): the checks and the numbers beside FlashMLA, on one GPU. From the
# repository root on the GPU machine, binaries in $B (default .devrun/main: sparsecp,
# test_gpu_kernels, gpu_bench_kernels, test_gpu_graphs), the sgl-flash-mla wheel in
# .devrun/whl (bench/attn_anchor.sh prepare):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3 5 4" bash bench/results/attn-ws-2026-12-05-h200/run.sh
#  PART=1: test_gpu_kernels' attention cases, clusters on ("auto") and off ("flat").
#  PART=2: kernel.sparse_attn, auto and flat alternating, twice.
#  PART=3: FlashMLA's sparse kernels on the same shapes (bench/attn_anchor.py flashmla).
#  PART=5: all of test_gpu_kernels and test_gpu_graphs, then run --verify at P2 N2 over a
#          2-layer model of model-deep's shape with each of $VERIFY_FORMATS (default bf16
#          and fp8_ds_mla rows: the clusters in the pipeline).
#  PART=6: branch wip/bf16-cross (binaries in $NEW, default .devrun/bx: k_attn_ws in
#          clusters over bf16 rows too): its attention cases, its kernel.sparse_attn
#          alternating with $B's, twice, and run --verify at P2 N2 with bf16 rows over the
#          2-layer model of model-deep's shape (the clusters in the pipeline).
#  PART=4: compute-sanitizer memcheck and synccheck of the attention cases, and synccheck
#          of all of test_gpu_kernels (at most $SYNC_ALL_S s, default 150; 0: not run) (racecheck is left out: it ran past 100 s on the attention
#          cases alone in session 31 and again here before).
. bench/device_common.sh
B=${B:-.devrun/main}
env_of() { case $1 in flat) echo SPARSECP_ATTN_CROSS=0 ;; *) echo SPARSECP_ATTN_WS=1 ;; esac; }
if has 1; then
  for v in auto flat; do
    env $(env_of $v) SC_GPU_CASES=attention timeout 60 $B/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
    echo "$v test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"
    grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head
  done
  lap tests
fi
if has 2; then
  for i in 1 2; do for v in auto flat; do
    env $(env_of $v) SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 $B/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
  done; done
  lap kernels
fi
if has 3; then
  flashmla_anchor
  lap flashmla
fi
if has 5; then
  timeout 200 $B/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
  timeout 150 $B/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
  for f in ${VERIFY_FORMATS:-bf16 fp8_ds_mla}; do
    timeout 200 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $f --model "$OUT/m128.json" --verify > "$OUT/verify-m128-$f.log" 2>&1
    echo "verify P2 N2 $f m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-$f.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
  lap pipeline
fi
if has 6; then
  NEW=${NEW:-.devrun/bx}
  SC_GPU_CASES=attention timeout 60 $NEW/test_gpu_kernels > "$OUT/test_attention_bx.log" 2>&1
  echo "bx test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attention_bx.log") ok"
  grep -E "FAIL|not ok" "$OUT/test_attention_bx.log" | cut -c1-200 | head
  for i in 1 2; do for v in main bx; do
    d=$B; [ $v = bx ] && d=$NEW
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 $d/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
  done; done
  sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
  [ -n "$NO_BX_VERIFY" ] || timeout 200 $NEW/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --model "$OUT/m128.json" --verify > "$OUT/verify-m128-bx.log" 2>&1
  echo "bx verify P2 N2 bf16 m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128-bx.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  lap bf16-cross
fi
if has 4; then
  SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1
  echo "memcheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attention.log" | head -1)"
  SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool synccheck $B/test_gpu_kernels > "$OUT/synccheck-attention.log" 2>&1
  echo "synccheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-attention.log" | head -1)"
  if [ "${SYNC_ALL_S:-150}" -gt 0 ]; then
    timeout ${SYNC_ALL_S:-150} compute-sanitizer --tool synccheck $B/test_gpu_kernels > "$OUT/synccheck-all.log" 2>&1
    echo "synccheck all rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-all.log" | head -1)"
    grep -E "^=========     at " "$OUT/synccheck-all.log" | sort | uniq -c | head -5
  fi
  lap sanitizer
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.jsonl *.err
