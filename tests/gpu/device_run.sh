#!/bin/bash
# device_run.sh - what one call on the GPU machine runs (see bench/kernels-cuda.md):
# the GPU tests, the SASS check of the attention kernel, the kernel benchmark (JSON) and
# a memcheck pass, with logs under $OUT. Expects the binaries and their libraries in
# .devrun/ (tests/gpu/stage.sh puts them there); cuBLAS is taken from the machine.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
cuobjdump -sass .devrun/test_gpu_kernels 2>/dev/null | grep -cE "HGMMA|HMMA" | sed "s/^/HGMMA + HMMA instructions: /" | tee -a "$OUT/gpu.txt"
fail=0 # the exit status: 1 when any test, the benchmark or memcheck failed
echo "== test_gpu_kernels"; timeout 240 .devrun/test_gpu_kernels 2>&1 | tee "$OUT/test_kernels.log"
rc=${PIPESTATUS[0]}; echo "rc=$rc"; [ "$rc" = 0 ] || fail=1
echo "== test_gpu_nccl"; timeout 60 .devrun/test_gpu_nccl 2>&1 | tee "$OUT/test_nccl.log"
rc=${PIPESTATUS[0]}; echo "rc=$rc"; [ "$rc" = 0 ] || fail=1
[ "${SC_BENCH:-1}" = 1 ] || { echo "(benchmark skipped)"; exit $fail; }
echo "== bench"; timeout 240 .devrun/gpu_bench_kernels --json > "$OUT/bench.json" 2> "$OUT/bench.err"
rc=$?; echo "rc=$rc"; [ "$rc" = 0 ] || fail=1
tail -3 "$OUT/bench.err"
python3 - "$OUT/bench.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    p = r["params"]
    keys = {k: p[k] for k in ("tokens", "heads", "topk", "kv", "phase", "rows", "role", "q_per_request") if k in p}
    print(f'{r["name"]:28s} {r["median"]:10.1f} {r["unit"]:8s} tflops={r.get("tflops",0):7.1f} gbps={r.get("gbps",0):7.0f} '
          f'floor={r.get("fraction_of_floor",0):.3f} fm={r.get("fraction_of_flashmla","-")} {keys}')
PY
# optional: a profile of one attention launch
if [ "${SC_NCU:-0}" = 1 ]; then
  echo "== ncu (one decode attention launch)"
  SC_BENCH_KERNELS_ONLY=sparse_attn.decode timeout 200 ncu --clock-control none \
    --kernel-name regex:k_attn_wg --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
    --log-file "$OUT/ncu.txt" .devrun/gpu_bench_kernels > /dev/null 2>&1; echo "rc=$?"
  grep -E "Duration|Throughput|Stall|Issue|Warp Cycles|Eligible|Pipe|Bank|Achieved|Compute \(SM\)|Memory \[" "$OUT/ncu.txt" | head -60
fi
if [ "${SC_MEMCHECK:-1}" = 1 ]; then
  echo "== memcheck"; timeout 200 compute-sanitizer --tool memcheck --print-limit 20 .devrun/test_gpu_kernels > "$OUT/memcheck.log" 2>&1
  rc=$?; echo "rc=$rc"; [ "$rc" = 0 ] || fail=1
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
fi
exit $fail
