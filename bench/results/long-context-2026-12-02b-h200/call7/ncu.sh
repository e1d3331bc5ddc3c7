set -u
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
SC_TMP_PREFILL_ONLY=1 timeout 100 .devrun/exp/bench_prefill --json 2>/dev/null | python3 -c "
import json,sys
for r in json.load(sys.stdin)['results']:
  if r['name']=='kernel.indexer': print('prefill 32k bf16 keys:', round(r['median'],1), r['unit'], 'GF ->', round(2*4*64*(32768*32769/2)/r['median']/1e6,2), 'ms')"
SC_TMP_PREFILL_ONLY=1 timeout 300 ncu --clock-control none --kernel-name regex:k_idx_tc --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section LaunchStats \
  .devrun/exp/bench_prefill > $OUT/ncu.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|Throughput|Stall|Issue|Warp Cycles|Eligible|Achieved|Compute \(SM\)|Memory \[|Registers|Shared Memory|Block Limit|Theoretical|L1/TEX Hit|L2 Hit|Active Warps" $OUT/ncu.txt | head -60
M=""
for s in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait lg_throttle membar no_instruction not_selected dispatch_stall branch_resolving drain imc_miss tex_throttle selected; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
SC_TMP_PREFILL_ONLY=1 timeout 200 ncu --clock-control none --kernel-name regex:k_idx_tc --launch-skip 1 --launch-count 1 \
  --metrics "${M#,}" .devrun/exp/bench_prefill > $OUT/ncu-stalls.txt 2>&1; echo "ncu stalls rc=$?"
grep -E "stalled" $OUT/ncu-stalls.txt | head -20; tail -3 $OUT/ncu-stalls.txt
