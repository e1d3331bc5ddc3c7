#!/bin/bash
# run11.sh (session 57): what the DCP top-K merge costs at the real top-K (2048): main's
# `kernel.topk` case (128 tokens, 4 shards x 2048 candidates, one block a token), and a
# decode at P2 N2 over ipc of model-long (top-K 2048) after a 16k prompt, profiled
# (CUPTI's costliest ops of each rank: k_topk_final's launches a layer), against the
# same at P1 N1 (~2 min). Binaries: .devrun/m (main eb367ec).
. bench/device_common.sh
SC_BENCH_KERNELS_ONLY=kernel.topk timeout 100 .devrun/m/gpu_bench_kernels --json > "$OUT/topk.json" 2> "$OUT/topk.err"
echo "kernel.topk rc=$?"; python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for r in d.get('results', d if isinstance(d, list) else []):
    print(' ', r.get('name'), r.get('params'), 'median', r.get('median_s', r.get('seconds', {})))
" "$OUT/topk.json" 2>&1 | cut -c1-250
lap topk
printf '{"prompt_len": 16384, "max_tokens": 64, "seed": 7}\n' > "$OUT/req16k.jsonl"
for lay in "1 1 nccl off" "2 2 ipc on"; do
  set -- $lay
  f="$OUT/prof16k-p$1"
  SPARSECP_LOG=info timeout 120 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp $1 --dcp $2 \
    --collectives $3 --mps $4 --profile --model examples/model-long.json --kv-format bf16 \
    --token-budget 16384 --max-model-len 16512 --num-blocks 2200 --requests "$OUT/req16k.jsonl" > "$f.log" 2>&1
  echo "profile 16k P$1 N$2 rc=$?"; grep -E "tpot|TPOT" "$f.log" | tail -2 | cut -c1-200
  grep -E "cuda: +[0-9]" "$f.log" | head -14 | sed 's/^.*cuda:/cuda:/' | cut -c1-160
  SPARSECP_LOG=info timeout 120 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp $1 --dcp $2 \
    --collectives $3 --mps $4 --json --model examples/model-long.json --kv-format bf16 \
    --token-budget 16384 --max-model-len 16512 --num-blocks 2200 --requests "$OUT/req16k.jsonl" > "$f.json" 2> "$f.err"
  echo "unprofiled 16k P$1 N$2 rc=$?"; show_run "$f.json"
done
lap prof
cd "$OUT" && tar czf topk.tgz topk.* prof16k-* 2>/dev/null; rm -f topk.* prof16k-*
