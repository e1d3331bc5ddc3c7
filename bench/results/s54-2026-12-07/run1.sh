#!/bin/bash
# run1.sh (session 54): session 53's run13.sh (PART 1 and 2: allpick's whole check,
# staged by its build13.sh), and PART 3: is the four-rank step's LM head a part of its
# cost? Every rank of an overlapped P4 N4 cluster computes the greedy tokens, so four
# LM heads a step read 64 MB of f32 weights each (the default model: vocab 32768 x 512)
# where one rank reads one. The default model and the same with vocab 4096 (8 MB), P4
# N4 over ipc under MPS and one rank over NCCL, two rounds each, main's binary (.devrun/f).
here=bench/results/s54-2026-12-07
[ " ${PART:-1} " == *" 1 "* ] || [ " ${PART:-1} " == *" 2 "* ] && bash bench/results/s53-2026-12-07/run13.sh
. bench/device_common.sh
if has 3; then
  python3 - "$OUT/m-v4k.json" <<'PY'
import json, sys
json.dump({"vocab": 4096}, open(sys.argv[1], "w"))
PY
  requests 4 500 "$OUT/req4.jsonl"
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
  p1="--device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json --requests $OUT/req4.jsonl"
  for round in 1 2; do for m in default v4k; do
    margs=""; [ $m = v4k ] && margs="--model $OUT/m-v4k.json"
    SPARSECP_LOG=info timeout 100 .devrun/f/sparsecp run $p4 $margs > "$OUT/p4-$m-$round.json" 2> "$OUT/p4-$m-$round.err"
    echo "P4 N4 ipc $m $round rc=$?"; show_run "$OUT/p4-$m-$round.json"
    SPARSECP_LOG=info timeout 100 .devrun/f/sparsecp run $p1 $margs > "$OUT/p1-$m-$round.json" 2> "$OUT/p1-$m-$round.err"
    echo "one rank $m $round rc=$?"; show_run "$OUT/p1-$m-$round.json"
  done; done
  lap vocab
  cd "$OUT" && tar czf vocab.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.jsonl *.err
fi
