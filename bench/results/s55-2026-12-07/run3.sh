#!/bin/bash
# run3.sh (session 55): build3.sh's m on the GPU, short (~2.5 min): run --verify at P2 N2
# (its ranks other than 0 compute tokens they do not download), `bench e2e --device cuda
# --quick --kv-format bf16` (the new e2e.step_gap beside the TPOT cases), then the default
# model's P4 N4 over ipc under MPS and one rank over NCCL, n / m alternating twice.
. bench/device_common.sh
BIN=.devrun/m verify_p2n2
timeout 150 .devrun/m/sparsecp bench e2e --device cuda --quick --kv-format bf16 --json > "$OUT/e2e-m.json" 2> "$OUT/e2e-m.err"
echo "e2e m rc=$?"; show_e2e "$OUT/e2e-m.json"; grep -h "gap between steps" "$OUT/e2e-m.err" | head -4 | cut -c1-220
lap e2e
requests 4 500 "$OUT/req4.jsonl"
for round in 1 2; do for v in n m; do
  SPARSECP_LOG=info timeout 60 .devrun/$v/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 \
    --collectives ipc --json --requests "$OUT/req4.jsonl" > "$OUT/p4-$v-$round.json" 2> "$OUT/p4-$v-$round.err"
  echo "P4 N4 $v $round rc=$?"; show_run "$OUT/p4-$v-$round.json"
  grep -h "the device went" "$OUT/p4-$v-$round.err" | sed 's/^.*executor: //' | cut -c1-120
  SPARSECP_LOG=info timeout 60 .devrun/$v/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
    --json --requests "$OUT/req4.jsonl" > "$OUT/one-$v-$round.json" 2> "$OUT/one-$v-$round.err"
  echo "one rank $v $round rc=$?"; show_run "$OUT/one-$v-$round.json"
done; done
lap tpot
cd "$OUT" && tar czf r3.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
