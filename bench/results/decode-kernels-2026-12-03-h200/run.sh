# run.sh - the default model's decode kernels, one at a time (issue 20: TPOT 0.3 ms),
# 2026-12-03, one H200. From the repository root on the GPU machine, binaries in .devrun/
# (.devrun/base/: the tree before this session's changes, for a baseline in the same call):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/decode-kernels-2026-12-03-h200/run.sh
#  PART=1: ncu of one decode step's attention (k_attn_split), indexer (k_idx_tc) and
#          linears (k_linears) of the default model, P1 N1 (launches after the first steps).
#  PART=2: decode TPOT, base against this tree, alternating twice (default model, 4
#          requests 500 ms apart; model-small; model-deep once), the tokens compared;
#          the profiled ops log of the default model for each binary.
#  PART=3: test_gpu_kernels, test_gpu_graphs, run --verify at P2 N2 (this tree).
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
tpot() { # NAME MODEL_ARGS ROUNDS
  for ((i = 1; i <= $3; i++)); do for b in base new; do
    bin=.devrun/sparsecp; [ $b = base ] && bin=.devrun/base/sparsecp
    f="$OUT/$1-$b-$i"
    SPARSECP_LOG=info timeout 150 $bin run $run1 $2 --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "$1 $b $i rc=$?"; show_run "$f.json"
  done; done
  python3 - "$OUT/$1" <<'PY'
import json, sys
t = {b: [r.get("tokens") for r in json.load(open(f"{sys.argv[1]}-{b}-1.json"))["results"]] for b in ("base", "new")}
same = sum(x == y for x, y in zip(t["base"], t["new"]))
print("  requests with the same tokens, base and new:", same, "of", len(t["new"]))
PY
  lap $1
}
if has 2; then
  tpot default "" 2
  tpot small "--model examples/model-small.json" 2
  tpot deep "--model examples/model-deep.json" 1
  for b in base new; do
    bin=.devrun/sparsecp; [ $b = base ] && bin=.devrun/base/sparsecp
    SPARSECP_LOG=info timeout 150 $bin run $run1 --profile --requests "$OUT/req1.jsonl" > "$OUT/prof-$b.json" 2> "$OUT/prof-$b.err"
    echo "profiled $b rc=$?"; grep -A24 "the device's kernels" "$OUT/prof-$b.err" | cut -c1-150
  done
  lap prof
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
