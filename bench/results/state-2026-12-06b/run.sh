#!/bin/bash
# run.sh - main's state for issues 18, 19 and 20 in one call (binaries: build.sh; with
# carry [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh). ~6 minutes:
#  19: kernel.sparse_attn twice and FlashMLA;
#  18: kernel.indexer twice and PyTorch's indexer + top-K; bench e2e --device cuda over
#      bf16 rows (TTFT, TPOT ratios); one 32k prompt of model-long profiled (where a long
#      prompt's time goes now: the ops by time, the stages);
#  20: the default model's decode TPOT at P4 N4 over ipc under MPS and at one rank, three
#      rounds.
. bench/device_common.sh
attn_alternating main
flashmla_anchor
lap attention
indexer_alternating main
timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-200 "$OUT/torch-anchor.jsonl" | head -12
lap indexer
timeout 200 .devrun/main/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-bf16.json" 2> "$OUT/bench-e2e-bf16.err"
echo "e2e bf16 rc=$?"; show_e2e "$OUT/bench-e2e-bf16.json"
lap e2e
printf '{"prompt_len": 32768, "max_tokens": 2, "arrive_ms": 0, "seed": 1}\n' > "$OUT/long.jsonl"
SPARSECP_LOG=info timeout 150 .devrun/main/sparsecp run --device cuda --pcp 1 --dcp 1 --clients 1 \
  --model examples/model-long.json --kv-format bf16 --max-model-len 32800 --requests "$OUT/long.jsonl" \
  --profile --json > "$OUT/prof-long.json" 2> "$OUT/prof-long.err"
echo "profiled 32k prompt rc=$?"; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ttft', d.get('ttft_ms_p50'), d.get('error'))" "$OUT/prof-long.json"
grep -A16 "by time" "$OUT/prof-long.err" | cut -c1-160 | head -18
grep -iE "stage|prefill" "$OUT/prof-long.err" | head -6 | cut -c1-250
lap long
requests 4 500 "$OUT/req4.jsonl"
p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
for ((round = 1; round <= 3; round++)); do
  SPARSECP_LOG=info timeout 150 .devrun/main/sparsecp run $p4 > "$OUT/p4-$round.json" 2> "$OUT/p4-$round.err"
  echo "P4 N4 ipc $round rc=$?"; show_run "$OUT/p4-$round.json"
  tpot_alternating 1 main "$OUT/req4.jsonl"
  mv "$OUT/one-main-1.json" "$OUT/one-r$round.json"; mv "$OUT/one-main-1.err" "$OUT/one-r$round.err"
done
lap tpot
cd "$OUT" && tar czf all.tgz *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err *.jsonl
