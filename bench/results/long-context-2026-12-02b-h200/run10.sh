set -u
OUT=${OUT:-/tmp/out}
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
timeout 120 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
grep -E "FAIL|cache keys|heads=8 dc=512|heads=64 dc=512 dr=64 topk=2048" "$OUT/test_kernels.log"
timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
for kv in f32 bf16; do
  f="$OUT/verify-$kv-model-long.log"
  timeout 100 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $kv --verify --model examples/model-long.json > "$f" 2>&1
  echo "verify $kv rc=$? $(tail -1 "$f")"; grep "verify (single" "$f"
done
