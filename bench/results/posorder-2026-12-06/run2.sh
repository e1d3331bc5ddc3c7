#!/bin/bash
# the 32k prompt's kernels one by one under ncu (posorder), then its TTFT with the
# floors' stride default / off / 16 / 64, alternating twice
. bench/device_common.sh
P=.devrun/posorder
printf '{"prompt_len": 32768, "max_tokens": 2, "arrive_ms": 0, "seed": 1}\n' > "$OUT/long.jsonl"
RUN="run --device cuda --pcp 1 --dcp 1 --clients 1 --model examples/model-long.json --kv-format bf16 --token-budget 32768 --max-model-len 32800 --num-blocks 2100 --requests $OUT/long.jsonl --json"
timeout 240 ncu --target-processes all --kernel-name regex:'k_idx|k_topk|k_attn_few|k_rsel' --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size $P/sparsecp $RUN > "$OUT/ncu.log" 2>&1
echo "ncu rc=$?"
grep -E "^  k_|^  _Z|k_idx|k_topk|k_attn|k_rsel|gpu__time_duration|launch__grid_size" "$OUT/ncu.log" | grep -v "==PROF==" | sed 's/(\([0-9]*\), *\([0-9]*\), *\([0-9]*\))x.*/ \1x\2x\3/' | cut -c1-140 | head -90
lap ncu
for r in 1 2; do for f in default 0 16 64; do
  if [ $f = default ]; then unset SPARSECP_INDEXER_FLOORS; else export SPARSECP_INDEXER_FLOORS=$f; fi
  timeout 60 $P/sparsecp $RUN > "$OUT/ttft-$f-$r.json" 2> "$OUT/ttft-$f-$r.err"
  echo "floors=$f $r rc=$? $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('ttft', d.get('ttft_ms_p50'), d.get('error'))" "$OUT/ttft-$f-$r.json")"
done; done
unset SPARSECP_INDEXER_FLOORS
lap ttft
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
