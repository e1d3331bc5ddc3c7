#!/bin/bash
# run1.sh (session 55): session 54's run5.sh (the device's draws and margins,
# pending/device-draw.patch; .devrun/n = a0fe4fe + the patch, .devrun/f = a0fe4fe, staged
# by ../s54-2026-12-07/build5.sh), then four ranks over ipc under MPS f / n twice, greedy
# and at temperature 1 (with the patch no rank downloads logits, and requests at a
# temperature are planned ahead). Call with carry [".devrun"] (~6 min).
bash bench/results/s54-2026-12-07/run5.sh
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
sed 's/"seed"/"temperature": 1.0, "seed"/' "$OUT/req4.jsonl" > "$OUT/req4hot.jsonl"
for q in req4 req4hot; do
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/$q.jsonl --collectives ipc"
  for round in 1 2; do for v in f n; do
    SPARSECP_LOG=info timeout 100 .devrun/$v/sparsecp run $p4 > "$OUT/p4-$q-$v-$round.json" 2> "$OUT/p4-$q-$v-$round.err"
    echo "P4 N4 ipc $q $v $round rc=$?"; show_run "$OUT/p4-$q-$v-$round.json"
  done; done
done
lap p4
cd "$OUT" && tar czf p4.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.jsonl *.err
