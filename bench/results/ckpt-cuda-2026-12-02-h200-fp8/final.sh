#!/bin/bash
# issue 22/23 final GPU checks: kernels, resident fp8 checkpoints on CUDA ranks, GPU memory of fp8 vs bf16, recovery
set -u
export LD_LIBRARY_PATH=$PWD/.devrun/lib; . tests/gpu/cuda_env.sh $PWD/.devrun/lib > /dev/null
bin=$PWD/.devrun/sparsecp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt; date -u | tee -a $OUT/gpu.txt
echo "== test_gpu_kernels"; timeout 240 .devrun/test_gpu_kernels > $OUT/test_kernels.log 2>&1; echo rc=$?; grep -E "checkpoint_ops|FAIL|PASSED" $OUT/test_kernels.log | head
echo "== test_gpu_nccl"; timeout 60 .devrun/test_gpu_nccl > $OUT/test_nccl.log 2>&1; echo rc=$?
$bin mkmodel /tmp/m-fp8 > /dev/null; $bin mkmodel --dtype bf16 /tmp/m-bf16 > /dev/null
run() { name=$1; shift; timeout 240 $bin run --quiet --json "$@" > $OUT/$name.json 2> $OUT/$name.err; rc=$?
  echo "$name rc=$rc $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get('ok'), d.get('verify'))" $OUT/$name.json 2>/dev/null)"; }
run fp8-111-nccl --model-dir /tmp/m-fp8 --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --verify
run fp8-221 --model-dir /tmp/m-fp8 --device cuda --pcp 2 --dcp 2 --verify
run fp8-441 --model-dir /tmp/m-fp8 --device cuda --pcp 4 --dcp 4 --verify
run fp8-222 --model-dir /tmp/m-fp8 --device cuda --pcp 2 --dcp 2 --tp 2 --verify
python3 - $OUT <<'PY'
import json, sys
o = sys.argv[1]
ref = [r.get("tokens") for r in json.load(open(f"{o}/fp8-111-nccl.json"))["results"]]
for n in ("fp8-221", "fp8-441", "fp8-222"):
    got = [r.get("tokens") for r in json.load(open(f"{o}/{n}.json"))["results"]]
    print(n, "identical to P1 on the GPU:", sum(a == b for a, b in zip(ref, got)), "of", len(ref))
PY
echo "== GPU memory: a larger generated model, fp8 vs bf16 (one NCCL rank)"
for dt in fp8 bf16; do
  $bin mkmodel --dtype $dt --hidden 2048 --layers 8 --dense-layers 2 --experts 64 --vocab 4096 /tmp/big-$dt > $OUT/mk-$dt.txt 2>&1
  du -sh /tmp/big-$dt | tee -a $OUT/mk-$dt.txt
  timeout 200 $bin run --quiet --json --model-dir /tmp/big-$dt --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --num-requests 8 > $OUT/big-$dt.json 2> $OUT/big-$dt.err &
  p=$!; peak=0
  while kill -0 $p 2>/dev/null; do
    u=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1); [ "$u" -gt "$peak" ] && peak=$u; sleep 0.3; done
  wait $p; echo "big-$dt rc=$? peak GPU memory used ${peak} MiB tpot=$(python3 -c "import json;print(json.load(open('$OUT/big-$dt.json')).get('tpot_ms_p50'))" 2>/dev/null)"
done
echo "== recovery_gpu"; OUT=$OUT/rec timeout 300 bash tests/gpu/recovery_gpu.sh > $OUT/recovery_gpu.log 2>&1; echo rc=$?; grep -E "rc=|identical|ready on all" $OUT/recovery_gpu.log | head -20
rm -rf $OUT/rec/*.out 2>/dev/null; true
