#!/bin/bash
# run.sh (session 49): session 48's run1.sh (PART 1-4: the dense path's units of shared
# keys, .devrun/p against main's .devrun/m) and, where the card is an H200 (the issues'
# goals name one), PART 5: main's state for issues 18-20 on it. Staged by session 48's
# build1.sh, then main's sparsecp into .devrun/m and the FlashMLA wheel into .devrun/whl
# (bench/attn_anchor.sh prepare). Call with carry [".devrun"], PART "1 2 3 4" (~5 min),
# then PART 5 (~5 min) on the same warm machine.
#  6. the other GPU tests and `run --verify` (P2 N2; model-long's 8k prompts) with the
#     patch (.devrun/p: sparsecp and the GPU tests of main + pairs.patch).
#  5. kernel.sparse_attn twice and FlashMLA (19); bench e2e --device cuda over bf16 rows
#     (18); the default model's TPOT at P4 N4 over ipc under MPS and at one rank, three
#     rounds (20).
# Staged beside them: .devrun/p's sparsecp and other GPU tests (main + pairs.patch).
here=$(cd "$(dirname "$0")" && pwd)
PART=${PART:-1} bash "$here/../s48-2026-12-07/run1.sh"
. bench/device_common.sh
if has 5; then
  for i in 1 2; do
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/m/gpu_bench_kernels --json > "$OUT/attn-$i.json" 2> /dev/null
    echo "attn $i rc=$?"; show_attn128 "$OUT/attn-$i.json" | grep -v "decode 256"
  done
  flashmla_anchor
  lap attention
  timeout 200 .devrun/m/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-bf16.json" 2> "$OUT/bench-e2e-bf16.err"
  echo "e2e bf16 rc=$?"; show_e2e "$OUT/bench-e2e-bf16.json"
  lap e2e
  requests 4 500 "$OUT/req4.jsonl"
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
  for ((round = 1; round <= 3; round++)); do
    SPARSECP_LOG=info timeout 100 .devrun/m/sparsecp run $p4 > "$OUT/p4-$round.json" 2> "$OUT/p4-$round.err"
    echo "P4 N4 ipc $round rc=$?"; show_run "$OUT/p4-$round.json"
    tpot_alternating 1 m "$OUT/req4.jsonl"
    mv "$OUT/one-m-1.json" "$OUT/one-r$round.json"; mv "$OUT/one-m-1.err" "$OUT/one-r$round.err"
  done
  lap tpot
  cd "$OUT" && tar czf state.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.jsonl *.err
fi
if has 6; then
  other_gpu_tests .devrun/p
  BIN=.devrun/p verify_p2n2
  BIN=.devrun/p verify_long8k
  lap checks
fi
