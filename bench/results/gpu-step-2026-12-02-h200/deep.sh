#!/bin/bash
# issue 20 "before": decode at a 64-token context, P1 N1 on one GPU (NCCL), per-step profile
set -u
export LD_LIBRARY_PATH=$PWD/.devrun/lib; . tests/gpu/cuda_env.sh $PWD/.devrun/lib > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt; date -u | tee -a $OUT/gpu.txt
for m in model-deep model-default; do
  margs="--model examples/$m.json"; [ $m = model-default ] && margs=""
  for prof in 0 1; do
    pa=""; [ $prof = 1 ] && pa="--profile"
    t0=$(date +%s.%N)
    SPARSECP_LOG=info timeout 280 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $margs --requests .devrun/req64.jsonl --clients 1 --json $pa > $OUT/$m-prof$prof.json 2> $OUT/$m-prof$prof.err
    echo "$m profile=$prof rc=$? $(python3 -c "import time;print(round(time.time()-$t0,1))") s"
    python3 - $OUT/$m-prof$prof.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); print({k:v for k,v in d.items() if k!="results"})
PY
  done
done
grep -h "executor: rank 0: step" $OUT/model-deep-prof1.err | tail -3
