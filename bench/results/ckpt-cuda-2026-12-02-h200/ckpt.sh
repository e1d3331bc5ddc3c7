#!/bin/bash
# issue 23 on the GPU: the checkpoint ops' kernels, and checkpoints served by CUDA ranks
set -u
export LD_LIBRARY_PATH=$PWD/.devrun/lib; . tests/gpu/cuda_env.sh $PWD/.devrun/lib > /dev/null
bin=.devrun/sparsecp
echo "== test_gpu_kernels"; timeout 240 .devrun/test_gpu_kernels > $OUT/test_kernels.log 2>&1; echo rc=$?; grep -E "case_checkpoint_ops|FAIL|PASSED" $OUT/test_kernels.log | head
$bin mkmodel /tmp/m-fp8 > $OUT/mkmodel.txt 2>&1; echo mkmodel rc=$?
$bin mkmodel --dtype bf16 /tmp/m-bf16 >> $OUT/mkmodel.txt 2>&1; echo mkmodel bf16 rc=$?
run() { name=$1; shift; timeout 240 $bin run --quiet --json "$@" > $OUT/$name.json 2> $OUT/$name.err; rc=$?
  echo "$name rc=$rc $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('ok','verified','mismatches','ties','generated_tokens','tpot_ms_p50')})" $OUT/$name.json 2>/dev/null)"; tail -2 $OUT/$name.err; }
run fp8-p2n2-staged --model-dir /tmp/m-fp8 --device cuda --pcp 2 --dcp 2 --verify
run bf16-p2n2t2-staged --model-dir /tmp/m-bf16 --device cuda --pcp 2 --dcp 2 --tp 2 --verify
run fp8-nccl-p1 --model-dir /tmp/m-fp8 --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --verify
run tiny-hf-p2n2 --model-dir tests/data/hf_checkpoint/tiny-bf16 --device cuda --pcp 2 --dcp 2 --verify
