# run4.sh - session 34's second call (binaries: build4.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-cross-2026-12-05/run4.sh)
# The attention cases of p16 and ahead, memcheck of ahead's, then
# kernel.sparse_attn of main / p16 / ahead alternating twice, FlashMLA, ncu. (The
# whole of test_gpu_kernels left out: the device time left was short; SHORT=1 leaves out
# memcheck and ncu too.)
. bench/device_common.sh
for v in p16 ahead; do
  SC_GPU_CASES=attention timeout 60 .devrun/$v/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
  echo "$v attention rc=$? $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"; grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head -5
done
[ -z "$SHORT" ] && SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool memcheck .devrun/ahead/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1
echo "memcheck attention ahead rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attention.log" | head -1)"
lap checks
for i in 1 2; do for v in main p16 ahead; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
  echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json" | grep -v "decode 256"
done; done
lap kernels
flashmla_anchor
lap flashmla
# ncu with source counters: ahead's fp8 decode in clusters (kernels picked by their mangled names)
ncu_case() { # NAME BINARY_SET CASE MANGLED
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.$3 timeout 150 ncu --clock-control none --set full --import-source yes \
    --kernel-name-base mangled -k "regex:$4" --launch-skip 2 --launch-count 1 \
    -o "$OUT/ncu-$1" .devrun/$2/gpu_bench_kernels --json > "$OUT/ncu-$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  ncu -i "$OUT/ncu-$1.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-src-$1.csv" 2>&1
  ncu -i "$OUT/ncu-$1.ncu-rep" --page details > "$OUT/ncu-det-$1.txt" 2>&1
  grep -E "k_attn|Duration|Eligible Warps|Warp Cycles Per Issued|Issued Warp|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu-det-$1.txt" | head -10 | cut -c1-120
  gzip -f "$OUT/ncu-src-$1.csv"; rm -f "$OUT/ncu-$1.ncu-rep"
}

[ -z "$SHORT" ] && ncu_case fp8-ahead ahead decode _Z9k_attn_wsILb1ELb1E
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
