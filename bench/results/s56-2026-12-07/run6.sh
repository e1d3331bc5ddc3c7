#!/bin/bash
# run6.sh (session 56): what four ranks pay for sharing the GPU alone, with no collective
# at all. Four one-rank clusters decode at once under one MPS server (the user daemon
# at /tmp/nvidia-mps, which `run` inherits: docs/cuda.md "Ranks sharing a GPU"), against
# one such cluster alone and P4 N4 over ipc under the same server; the default model and
# examples/model-small.json. Long decodes so that the four runs overlap whatever their
# start-up skew: 4 requests of 64 + 3000 tokens arriving together (4 decode rows a
# step), --num-blocks 1024. If four independent ranks already take ~2x one rank, the
# four-rank goal needs less work or traffic a rank (one copy of the weights a GPU);
# if they take ~1.2x, the excess of P4 N4 is its rounds. Binaries of
# ../s55-2026-12-07/build3.sh's m; carry [".devrun"] (~3 min).
. bench/device_common.sh
for i in 0 1 2 3; do
  printf '{"prompt_len": 64, "max_tokens": 3000, "arrive_ms": 0, "seed": %d}\n' $i
done > "$OUT/req-long.jsonl"
nvidia-cuda-mps-control -d && sleep 1
echo get_server_list | nvidia-cuda-mps-control > /dev/null; echo "mps daemon rc=$?"
one() { # TAG MODEL-ARGS...: a one-rank cluster (NCCL) over the long requests
  local tag=$1; shift
  SPARSECP_LOG=info timeout 120 .devrun/m/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 \
    --clients 1 --num-blocks 1024 --json --requests "$OUT/req-long.jsonl" "$@" > "$OUT/$tag.json" 2> "$OUT/$tag.err"
}
for round in 1 2; do
  for model in default small; do
    margs=(); [ $model = small ] && margs=(--model examples/model-small.json)
    one "$model-alone-$round" "${margs[@]}"; echo "$model one rank alone $round rc=$?"; show_run "$OUT/$model-alone-$round.json"
    for i in 0 1 2 3; do one "$model-four$i-$round" "${margs[@]}" & done; wait
    for i in 0 1 2 3; do echo "$model one rank of four at once ($i) $round"; show_run "$OUT/$model-four$i-$round.json"; done
    f="$OUT/$model-p4-$round"
    SPARSECP_LOG=info timeout 120 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 \
      --collectives ipc --num-blocks 1024 --json --requests "$OUT/req-long.jsonl" "${margs[@]}" > "$f.json" 2> "$f.err"
    echo "$model P4 N4 $round rc=$?"; show_run "$f.json"
  done
done
echo quit | nvidia-cuda-mps-control
lap sharing
cd "$OUT" && tar czf sharing.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.jsonl *.err
