# run2.sh - session 33's second call: the fp8 producer's rows by one function for both
# kernels (ws_fp8_row<PEER>: one block a group also loads its rope through registers now;
# the clusters load a whole row before converting), against main (24b1382) in the same
# call; racecheck of the short warpgroup-role cases built with -lineinfo (the first call
# found 10 hazards at code offsets only); ncu source counters of the prefill over
# L2-resident rows and of the fp8 decode. Binaries: .devrun/main, .devrun/new (this
# tree), .devrun/li (this tree's test_gpu_kernels and gpu_bench_kernels with -lineinfo).
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-cross-2026-12-05/run2.sh
. bench/device_common.sh
N=.devrun/new
for v in on 0; do
  SPARSECP_ATTN_CROSS=$v SC_GPU_CASES=attention timeout 60 $N/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
  echo "new cross=$v attention rc=$? $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"
  grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head -5
done
SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck --racecheck-report all .devrun/li/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck attention_roles rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-roles.log" | head -1)"
grep -E "Race reported|access at" "$OUT/racecheck-roles.log" | sed 's/.*access at //' | sort | uniq -c | sort -rn | head -12 | cut -c1-200
lap tests
for i in 1 2; do for v in main new mainflat newflat; do
  d=$N; e=on; case $v in main*) d=.devrun/main ;; esac; case $v in *flat) e=0 ;; esac
  SPARSECP_ATTN_CROSS=$e SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 $d/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
  echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json" | grep -v "decode 256"
done; done
lap kernels
for c in prefill_l2 decode; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.$c timeout 150 ncu --clock-control none --set full --import-source yes \
    -k regex:k_attn_ws --launch-skip 2 --launch-count 1 -o "$OUT/ncu-$c" .devrun/li/gpu_bench_kernels --json > "$OUT/ncu-$c.txt" 2>&1
  echo "ncu $c rc=$?"
  ncu -i "$OUT/ncu-$c.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-src-$c.csv" 2>&1
  ncu -i "$OUT/ncu-$c.ncu-rep" --page details > "$OUT/ncu-det-$c.txt" 2>&1
  grep -E "k_attn|Duration|Eligible Warps|Warp Cycles Per Issued|Issued Warp|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu-det-$c.txt" | head -12 | cut -c1-120
  gzip -f "$OUT/ncu-src-$c.csv"; rm -f "$OUT/ncu-$c.ncu-rep"
done
lap ncu
timeout 120 $N/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head -5
timeout 100 $N/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
lap tests2
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err *.txt
