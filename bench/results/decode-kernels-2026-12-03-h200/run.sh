# run.sh - the default model's decode kernels, one at a time (issue 20: TPOT 0.3 ms),
# 2026-12-03, one H200. From the repository root on the GPU machine, binaries in .devrun/
# (.devrun/base/: the tree before this session's changes, for a baseline in the same call):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/decode-kernels-2026-12-03-h200/run.sh
#  PART=1: ncu of one decode step's attention (k_attn_split), indexer (k_idx_tc) and
#          linears (k_linears) of the default model, P1 N1 (launches after the first steps).
#  PART=2: decode TPOT, each binary of BINS, alternating twice (default model, 4
#          requests 500 ms apart; model-small; model-deep once), the tokens compared;
#          the profiled ops log of the default model for each binary.
#  PART=3: test_gpu_kernels, test_gpu_graphs, run --verify at P2 N2 (this tree).
#  PART=4: model-long decoding at an 8k context, P4 N4 under MPS, each binary; ncu of the
#          new attention split kernel.
#  BINS (default "base new"): the binaries compared in PART 2 and 4, .devrun/B/sparsecp
#  (new: .devrun/sparsecp); DEEP_BINS the same for model-deep ("none": skipped);
#  P4_ROUNDS the rounds of P4 N4 (default 1; 0: none). Call 2 carried base
#  (034e6b2), lin (e1ee323, the linears) and new (the attention's heads a block).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
printf '{"prompt_len": 64, "max_tokens": 24}\n' > "$OUT/req1.jsonl"
run1="--device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json"
if has 1; then
  for k in k_attn_split k_idx_tc k_linears; do
    timeout 150 ncu --clock-control none --target-processes all -k regex:$k --launch-skip 6 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      .devrun/sparsecp run $run1 --requests "$OUT/req1.jsonl" > "$OUT/ncu-$k.txt" 2>&1
    echo "ncu $k rc=$?"
    grep -E "^  [a-zA-Z_]+.*\(|Duration|Elapsed Cycles|Registers Per|Block Size|Grid Size|Theoretical Occ|Achieved Occ|Issued Warp|No Eligible|Warp Cycles Per Issued|Stall|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Dynamic Shared" "$OUT/ncu-$k.txt" | head -40
  done
  lap ncu
fi
# tpot NAME "MODEL_ARGS" ROUNDS "BINS" [REQ]: TPOT of each binary (.devrun/B/sparsecp; new:
# .devrun/sparsecp), alternating, and whether the first round's tokens agree with the last's
tpot() {
  local req=${5:-$OUT/req4.jsonl}
  for ((i = 1; i <= $3; i++)); do for b in $4; do
    bin=.devrun/sparsecp; [ $b != new ] && bin=.devrun/$b/sparsecp
    f="$OUT/$1-$b-$i"
    SPARSECP_LOG=info timeout 150 $bin run $run1 $2 --requests "$req" > "$f.json" 2> "$f.err"
    echo "$1 $b $i rc=$?"; show_run "$f.json"
  done; done
  python3 - "$OUT/$1" $4 <<'PY'
import json, sys
t = {b: [r.get("tokens") for r in json.load(open(f"{sys.argv[1]}-{b}-1.json"))["results"]] for b in sys.argv[2:]}
for b in sys.argv[2:-1]:
    same = sum(x == y for x, y in zip(t[b], t[sys.argv[-1]]))
    print(f"  requests with the same tokens, {b} and {sys.argv[-1]}:", same, "of", len(t[b]))
PY
  lap $1
}
if has 2; then
  tpot default "" 2 "${BINS:-base new}"
  tpot small "--model examples/model-small.json" 2 "${BINS:-base new}"
  [ "${DEEP_BINS:-}" != none ] && tpot deep "--model examples/model-deep.json" 1 "${DEEP_BINS:-base new}"
  for b in ${BINS:-base new}; do
    bin=.devrun/sparsecp; [ $b != new ] && bin=.devrun/$b/sparsecp
    SPARSECP_LOG=info timeout 150 $bin run $run1 --profile --requests "$OUT/req1.jsonl" > "$OUT/prof-$b.json" 2> "$OUT/prof-$b.err"
    echo "profiled $b rc=$?"; grep -A24 "the device's kernels" "$OUT/prof-$b.err" | cut -c1-150
  done
  lap prof
fi
if has 4; then
  # model-long (8 heads, f32 rows, top-K 2048) decoding at an 8k context: its attention
  # now takes 2 heads a block; and the four ranks sharing the GPU (MPS, staged)
  for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 400)) $i; done > "$OUT/req8k.jsonl"
  tpot long8k "--model examples/model-long.json --token-budget 8192 --max-model-len 8320 --num-blocks 1100" 1 "${BINS:-base new}" "$OUT/req8k.jsonl"
  for i in $(seq ${P4_ROUNDS:-1}); do for b in ${BINS:-base new}; do
    bin=.devrun/sparsecp; [ $b != new ] && bin=.devrun/$b/sparsecp
    f="$OUT/p4n4-$b-$i"
    SPARSECP_LOG=info timeout 150 $bin run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps auto --clients 1 --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "P4 N4 $b $i rc=$?"; show_run "$f.json"
  done; done
  lap p4n4
  timeout 150 ncu --clock-control none --target-processes all -k regex:k_attn_split --launch-skip 6 --launch-count 1 --section SpeedOfLight --section LaunchStats \
    .devrun/sparsecp run $run1 --requests "$OUT/req1.jsonl" > "$OUT/ncu-split-new.txt" 2>&1
  echo "ncu split rc=$?"; grep -E "^  [a-zA-Z_]+.*\(|Duration|Grid Size" "$OUT/ncu-split-new.txt" | head
  lap ncu
fi
if has 3; then
  timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
  timeout 150 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  for fmt in "" "--kv-format bf16"; do
    timeout 150 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
  lap tests
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err *.jsonl ncu-*.txt
