#!/bin/bash
# run3.sh (session 58; .devrun/l by build1.sh and .devrun/d by build2.sh, ~8 min): the
# parts of run1.sh and run2.sh that decide something, for a session that gets one call:
# test_gpu_ipc under MPS (the LSE round's case first of all), verify at P4 N4 over ipc
# with the round (l) and with the deferred weights (d), the four-rank TPOT with the round
# on and off and one rank, three rounds (l), and the deferred weights' memory and
# model-deep at P4 N4 (d). run1.sh's kernel and graph tests and profiles are left out.
. bench/device_common.sh
ipc_test_mps .devrun/l/test_gpu_ipc | tail -8
lap ipc
SPARSECP_IPC_LSE_ROUND=1 timeout 150 .devrun/l/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
  --collectives ipc --verify > "$OUT/verify-l.log" 2>&1
echo "verify P4 N4 ipc, LSE round (l) rc=$? $(grep -E 'verify' "$OUT/verify-l.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
SPARSECP_LOG=info timeout 150 .devrun/d/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
  --collectives ipc --verify > "$OUT/verify-d.log" 2>&1
echo "verify P4 N4 ipc, deferred weights (d) rc=$? $(grep -E 'verify' "$OUT/verify-d.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
grep -hE "one copy|of its GPU's first rank|builds its own|cannot share" "$OUT/verify-d.log" | cut -c1-160 | sort | uniq -c | head
lap verify
requests 4 500 "$OUT/req4.jsonl"
run4() { # BIN LSE_ROUND TAG [peak]
  env SPARSECP_IPC_LSE_ROUND=$2 SPARSECP_LOG=info timeout 60 .devrun/$1/sparsecp run --device cuda --gpus 1 --pcp 4 \
    --dcp 4 --mps on --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/$3.json" 2> "$OUT/$3.err"
  echo "P4 N4 $1 lse_round=$2 rc=$?"; show_run "$OUT/$3.json"
}
for r in 1 2 3; do
  run4 l 1 one-$r
  run4 l 0 two-$r
  SPARSECP_LOG=info timeout 60 .devrun/l/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --collectives nccl \
    --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/r1-$r.json" 2> "$OUT/r1-$r.err"
  echo "one rank $r rc=$?"; show_run "$OUT/r1-$r.json"
done
lap four
peak() { # CMD...: runs it while sampling the GPU's memory; prints the most used (MiB)
  local f="$OUT/mem.$$"; : > "$f"
  ( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> "$f"; sleep 0.2; done ) &
  local s=$!; "$@"; local rc=$?; kill $s; wait $s 2> /dev/null
  echo "  rc=$rc, most memory used $(sort -n "$f" | tail -1) MiB"; rm -f "$f"
}
for v in l d; do echo "P4 N4 default model, $v:"; peak run4 $v 0 mem-$v; done
printf '{"prompt_len": 64, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' 0 0 500 1 1000 2 1500 3 > "$OUT/req-deep.jsonl"
echo "model-deep P4 N4 ipc, d:"
peak env SPARSECP_LOG=info timeout 200 .devrun/d/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
  --collectives ipc --model examples/model-deep.json --kv-format bf16 --clients 1 --json \
  --requests "$OUT/req-deep.jsonl" > "$OUT/deep-d.json" 2> "$OUT/deep-d.err"
show_run "$OUT/deep-d.json"; grep -hE "one copy|first rank|builds its own|error|cannot" "$OUT/deep-d.err" | cut -c1-200 | head -6
lap deep
cd "$OUT" && tar czf s58.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
