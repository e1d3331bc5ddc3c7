#!/bin/bash
# Third call (staging copies share a buffer): GPU tests, then bench e2e --device cuda of
# the new binaries and of the commit before (7f15def, .devrun/prev) alternating twice,
# and one profiled 64-token decode of each. Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
[ -f .devrun/prev/sparsecp.xz ] && xz -d .devrun/prev/sparsecp.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
echo "nsys: $(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)"
timeout 240 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
for round in 1 2; do
  for b in new prev; do
    bin=.devrun/sparsecp; [ $b = prev ] && bin=.devrun/prev/sparsecp
    timeout 300 $bin bench e2e --device cuda --json > "$OUT/e2e-$b-$round.json" 2> "$OUT/e2e-$b-$round.err"; echo "e2e $b $round rc=$?"
    python3 - "$OUT/e2e-$b-$round.json" <<'PY'
import json, sys
print(" ".join(f'{r["name"][4:]}@{r["params"]["context"]}={r["median"]:.3f}' for r in json.load(open(sys.argv[1]))["results"]))
PY
  done
done
printf '{"prompt_len": 64, "max_tokens": 64}\n' > /tmp/req64.jsonl
for b in new prev; do
  bin=.devrun/sparsecp; [ $b = prev ] && bin=.devrun/prev/sparsecp
  SPARSECP_LOG=info timeout 100 $bin run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 \
    --profile --model examples/model-long.json --requests /tmp/req64.jsonl > "$OUT/profile64-$b.log" 2>&1
  echo "profile $b rc=$?"; grep "executor: rank 0: step" "$OUT/profile64-$b.log" | sed -n '30,32p'
done
cd "$OUT" && tar czf all.tgz *.log *.json *.err gpu.txt
