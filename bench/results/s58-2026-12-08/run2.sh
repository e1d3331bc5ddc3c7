#!/bin/bash
# run2.sh (session 58; .devrun/d by build2.sh, .devrun/l by build1.sh, ~4 min): one copy
# of the weights a GPU, none of the members' own (branch wip/defer-weights). run --verify
# at P4 N4 over ipc with d (the ranks' lines: rank 0 "one copy, built there", the others
# "none of its own"); the default model's P4 N4 decode with l and d, its TPOT and the
# GPU's most memory used while it ran (nvidia-smi every 0.2 s); then model-deep (61
# layers, ~32 GB of f32 weights a copy) at P4 N4 over ipc with d, which four copies
# (128 GB) kept off one GPU.
. bench/device_common.sh
peak() { # CMD...: runs it while sampling the GPU's memory; prints the most used (MiB)
  local f="$OUT/mem.$$"; : > "$f"
  ( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> "$f"; sleep 0.2; done ) &
  local s=$!; "$@"; local rc=$?; kill $s; wait $s 2> /dev/null
  echo "  rc=$rc, most memory used $(sort -n "$f" | tail -1) MiB"; rm -f "$f"
}
SPARSECP_LOG=info timeout 150 .devrun/d/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
  --collectives ipc --verify > "$OUT/verify-d.log" 2>&1
echo "verify P4 N4 ipc (d) rc=$? $(grep -E 'verify' "$OUT/verify-d.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
grep -hE "one copy|of its GPU's first rank|builds its own|cannot share" "$OUT/verify-d.log" | cut -c1-160 | sort | uniq -c | head
lap verify
requests 4 500 "$OUT/req4.jsonl"
for v in l d l d; do
  echo "P4 N4 default model, $v:"
  peak env SPARSECP_LOG=info timeout 60 .devrun/$v/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 \
    --mps on --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/p4-$v.json" 2> "$OUT/p4-$v.err"
  show_run "$OUT/p4-$v.json"
done
lap default
printf '{"prompt_len": 64, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' 0 0 500 1 1000 2 1500 3 > "$OUT/req-deep.jsonl"
echo "model-deep P4 N4 ipc, d:"
peak env SPARSECP_LOG=info timeout 240 .devrun/d/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
  --collectives ipc --model examples/model-deep.json --kv-format bf16 --clients 1 --json \
  --requests "$OUT/req-deep.jsonl" > "$OUT/deep-d.json" 2> "$OUT/deep-d.err"
show_run "$OUT/deep-d.json"; grep -hE "one copy|first rank|builds its own|error|cannot" "$OUT/deep-d.err" | cut -c1-200 | head -6
lap deep
cd "$OUT" && tar czf defer.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
