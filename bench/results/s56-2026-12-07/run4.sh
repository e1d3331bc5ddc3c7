#!/bin/bash
# run4.sh - where four ranks' decode step goes now (session 56; session 37's
# four-ranks-2026-12-06/run2.sh on today's main): the default model's decode (4 requests
# of 64 + 64 tokens 500 ms apart) once each with --profile (every rank logs each step's
# stages and, from CUPTI, its kernels' busy time and span; a profiled run does not
# overlap its steps), P4 N4 over ipc under MPS and one rank (NCCL), binaries of
# ../s55-2026-12-07/build3.sh's m (main 1998cf4), carry [".devrun"] (~1 min).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
SPARSECP_LOG=info timeout 90 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json \
  --requests "$OUT/req4.jsonl" --collectives ipc --profile > "$OUT/p4-prof.json" 2> "$OUT/p4-prof.err"
echo "P4 N4 ipc profiled rc=$?"; show_run "$OUT/p4-prof.json"
SPARSECP_LOG=info timeout 90 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --clients 1 --json \
  --requests "$OUT/req4.jsonl" --collectives nccl --profile > "$OUT/one-prof.json" 2> "$OUT/one-prof.err"
echo "one rank profiled rc=$?"; show_run "$OUT/one-prof.json"
for f in p4-prof one-prof; do
  echo "== $f: rank 0's 200th step"; grep "rank 0: step" "$OUT/$f.err" | sed -n 200p | cut -c1-700
  rank_step_medians "$OUT/$f.err"
done
cd "$OUT" && tar czf prof.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.err *.jsonl
