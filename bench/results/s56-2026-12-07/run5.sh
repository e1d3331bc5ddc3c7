#!/bin/bash
# run5.sh (session 56): is what four ranks pay beyond 2x one rank the weights' traffic?
# At P4 N4 every rank runs the whole dense part of a decode step (SPEC §3: decode rows are
# replicated) over its own copy of the weights, so four ranks read 4 x (24 MB of layer
# weights + 64 MB of LM head, f32) a step where one rank reads it once: ~70 us more at
# ~4 TB/s, about the whole excess over 2x (0.47 against 2 x 0.20 ms, session 55). Session
# 54's vocab-4096 run said no, but then one rank also paid the logits' trip to the host,
# gone since the device draws (session 55). Here, after it: the default model, the same
# with "vocab": 4096 (an 8 MB head) and examples/model-small.json (2 MB of weights in
# all), each at P4 N4 over ipc under MPS and at one rank over NCCL, two rounds; 4
# requests of 64 + 64 tokens 500 ms apart. If the traffic is the excess, the ratio falls
# with the weights (then one copy of the weights a GPU, shared by its ranks, is the fix);
# if it stays, the excess is the rounds' and the chains'. Binaries of
# ../s55-2026-12-07/build3.sh's m; carry [".devrun"] (~2 min).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
sed 's/"layers"/"vocab": 4096, "layers"/' <<< '{"layers": 2}' > "$OUT/v4096.json"
for round in 1 2; do
  for model in default v4096 small; do
    case $model in
      default) margs=() ;;
      v4096) margs=(--model "$OUT/v4096.json") ;;
      small) margs=(--model examples/model-small.json) ;;
    esac
    f="$OUT/$model-p4-$round"
    SPARSECP_LOG=info timeout 60 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 \
      --collectives ipc --json --requests "$OUT/req4.jsonl" "${margs[@]}" > "$f.json" 2> "$f.err"
    echo "$model P4 N4 $round rc=$?"; show_run "$f.json"
    grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-120 | head -4
    f="$OUT/$model-one-$round"
    SPARSECP_LOG=info timeout 60 .devrun/m/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
      --json --requests "$OUT/req4.jsonl" "${margs[@]}" > "$f.json" 2> "$f.err"
    echo "$model one rank $round rc=$?"; show_run "$f.json"
    grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-120
  done
done
lap weights
cd "$OUT" && tar czf weights.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.jsonl *.err
