#!/bin/bash
# run2.sh (session 58; .devrun/d by build2.sh, .devrun/l by build1.sh, ~4 min): one copy
# of the weights a GPU, none of the members' own (branch wip/defer-weights). run --verify
# at P4 N4 over ipc with d (the ranks' lines: rank 0 "one copy, built there", the others
# "none of its own"); the default model's P4 N4 decode with l and d, its TPOT and the
# GPU's most memory used while it ran (nvidia-smi every 0.2 s); then model-deep (61
# layers, ~32 GB of f32 weights a copy) at P4 N4 over ipc with d, which four copies
# (128 GB) kept off one GPU.
. bench/device_common.sh
verify_p4_ipc d
lap verify
requests 4 500 "$OUT/req4.jsonl"
for v in l d l d; do
  echo "P4 N4 default model, $v:"
  gpu_peak_mem env SPARSECP_LOG=info timeout 60 .devrun/$v/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 \
    --mps on --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/p4-$v.json" 2> "$OUT/p4-$v.err"
  show_run "$OUT/p4-$v.json"
done
lap default
deep_p4_ipc d 240
lap deep
cd "$OUT" && tar czf defer.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
