#!/bin/bash
# run4.sh - session 41's fourth call (b0fa85d + kernel.sparse_attn's fp8_ds_mla case for
# model-long's shapes; gpu_bench_kernels in .devrun/new; ~3 minutes): model-long's
# attention over f32, bf16 and fp8_ds_mla rows, then the few-heads prefill kernel over
# fp8_ds_mla and bf16 rows once each under ncu (why fp8 rows are slower at 8 heads).
. bench/device_common.sh
B=.devrun/new
SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 120 $B/gpu_bench_kernels --json > "$OUT/attn.json" 2> "$OUT/attn.err"
echo "attn rc=$?"
python3 - "$OUT/attn.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if p.get("heads") == 8:
        print(" ", r["name"], p["tokens"], p["kv"], "time_us", r["time_us"], "tflops", r["tflops"], "gbps", r["gbps"])
PY
lap attn
for v in "ILi32ELb1E fp8" "ILi32ELb0E bf16"; do set -- $v
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.prefill timeout 150 ncu --kernel-name-base mangled --kernel-name regex:"k_attn_few$1" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
    $B/gpu_bench_kernels > "$OUT/ncu-$2.log" 2>&1
  echo "ncu $2 rc=$?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Executed Ipc|L1/TEX Hit|Mem Busy|Max Bandwidth|Registers|Achieved Occupancy" "$OUT/ncu-$2.log" | head -30
done
lap ncu
cd "$OUT" && tar czf all4.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
