#!/bin/bash
# Call 2: the cuts without a pass for the largest key (tracked on append), 8 loads in flight;
# the indexer's GPU cases; kernel.indexer over tokens a block (SC_IDX_GROUP) and candidate
# room beyond K (SC_IDX_PIECE), both experiment knobs of this binary; ncu of the 32k prompt.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
SC_GPU_CASES=indexer timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels indexer rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
grep -E "FAIL|error" "$OUT/test_kernels.log" | head -8
for v in 16:1024 16:3072 8:3072 32:3072 16:6144; do g=${v%:*}; p=${v#*:}
  SC_IDX_GROUP=$g SC_IDX_PIECE=$p SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer-g$g-p$p.json" 2>/dev/null; echo "== g$g p$p rc=$?"
  python3 - "$OUT/kernels-indexer-g$g-p$p.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if r["name"] == "kernel.indexer": print(r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys") if k in p}, round(r["median"], 1), r["unit"])
PY
done
M=""
for s in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait lg_throttle membar no_instruction not_selected dispatch_stall branch_resolving drain selected; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
SC_IDX_GROUP=16 SC_TMP_PREFILL_ONLY=1 SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 ncu --clock-control none --kernel-name regex:k_idx_tc --launch-skip 1 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats --section LaunchStats --section InstructionStats \
  --metrics "${M#,}" .devrun/exp/bench_prefill > $OUT/ncu.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|Stall|Issue|Warp Cycles|Eligible|Achieved|Registers|Block Limit|Theoretical|Active Warps|stalled|Executed Ipc|Grid Size|Dynamic Shared" $OUT/ncu.txt | head -60
cd "$OUT" && tar czf all.tgz *.log *.json *.txt
