# run.sh - the indexer's 64-head shapes on wgmma (issue 18), 2026-12-04, one H200. From the
# repository root on the GPU machine, binaries in .devrun/ (.devrun/base/: a888a93, the
# tree before this session, for a baseline in the same call):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/indexer-wg-2026-12-04-h200/run.sh
#  PART=1: validation of the tree in .devrun (test_gpu_kernels, test_gpu_graphs, the
#          default model's TPOT twice, run --verify at P2 N2 with f32 and bf16 rows).
#  PART=2: ncu of the indexer's scoring (k_idx_tc) on the two 64-head cases of bench
#          kernels (decode: 128 tokens x 16384 keys each; prefill: 1024 causal over 16384).
#  PART=3: kernel.indexer of each binary of BINS (default "new base": .devrun and
#          .devrun/base; B: .devrun/B), alternating, twice; the PyTorch anchor
#          (bench/indexer_ref.py) in the same call (NO_TORCH=1: not).
#  PART=4: bench e2e --device cuda of .devrun.
#  PART=5: test_gpu_kernels' indexer cases only.
#  PART=7: compute-sanitizer memcheck of test_gpu_kernels' indexer cases.
#  PART=8: run --verify at P2 N2 of the default model with DeepSeek-V3.2's indexer shape
#          (64 index heads x 128), f32 and bf16 rows: the wgmma scoring in the pipeline.
#  PART=6: ncu, full set with source counters, of the scoring kernel on the 64-head
#          prefill case (.devrun/li: the same tree built with -lineinfo).
. bench/device_common.sh
run1="--device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json"
if has 1; then
  timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
  timeout 150 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  requests 4 500 "$OUT/req4.jsonl"
  for i in 1 2; do
    SPARSECP_LOG=info timeout 150 .devrun/sparsecp run $run1 --requests "$OUT/req4.jsonl" > "$OUT/default-$i.json" 2> "$OUT/default-$i.err"
    echo "default $i rc=$?"; show_run "$OUT/default-$i.json"
  done
  for fmt in "" "--kv-format bf16"; do
    timeout 150 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
  lap validation
fi
if has 5; then
  SC_GPU_CASES=indexer timeout 200 .devrun/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1; echo "test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"; grep -E "FAIL|not ok|indexer fmt" "$OUT/test_indexer.log" | cut -c1-200 | head -30
  lap tests
fi
if has 2; then
  for tok in 128 1024; do
    SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=$tok timeout 200 ncu --clock-control none -k regex:k_idx_tc --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats \
      ${NCU_BIN:-.devrun/gpu_bench_kernels} --json > "$OUT/ncu-idx-$tok.txt" 2>&1
    echo "ncu indexer $tok rc=$?"
    grep -E "^  [a-zA-Z_]+.*\(|Duration|Registers Per|Block Size|Grid Size|Dynamic Shared|Theoretical Occ|Achieved Occ|Issued Warp|No Eligible|Warp Cycles Per Issued|Stall|DRAM Throughput|Memory Throughput|L2 Hit|Executed Ipc" "$OUT/ncu-idx-$tok.txt" | head -40
  done
  lap ncu
fi
if has 7; then
  SC_GPU_CASES=indexer timeout 240 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1; echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log")"
  lap memcheck
fi
if has 8; then
  printf '{"index_heads": 64, "index_dim": 128}\n' > "$OUT/idx64.json"
  for fmt in "" "--kv-format bf16"; do
    timeout 200 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify --model "$OUT/idx64.json" $fmt > "$OUT/verify64.log" 2>&1; echo "verify idx64 P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify64.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
  lap verify64
fi
if has 6; then
  for tok in ${NCU_TOKENS:-1024}; do
    SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=$tok timeout 200 ncu --clock-control none --set full --import-source yes \
      -k regex:k_idx_tc --launch-skip 2 --launch-count 1 -o "$OUT/idx$tok" .devrun/li/gpu_bench_kernels --json > "$OUT/ncu-full-$tok.log" 2>&1; echo "ncu full $tok rc=$?"
    ncu -i "$OUT/idx$tok.ncu-rep" --page details > "$OUT/ncu-details-$tok.txt" 2>&1
    grep -E "Duration|Issued Warp|Warp Cycles Per Issued|Executed Instructions  " "$OUT/ncu-details-$tok.txt" | head -30
    ncu -i "$OUT/idx$tok.ncu-rep" --page source --csv --print-source cuda,sass -k regex:k_idx_tc > "$OUT/ncu-src-idx$tok.csv" 2>&1
  done
  rm -f "$OUT"/*.ncu-rep; gzip "$OUT"/ncu-src-*.csv; lap ncu-full
fi
if has 3; then
  for i in 1 2; do for v in ${BINS:-new base}; do
    bin=.devrun/gpu_bench_kernels; [ $v != new ] && bin=.devrun/$v/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 $bin --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"
    echo "indexer $v $i rc=$?"; show_indexer "$OUT/kernels-indexer-$v-$i.json"
  done; done
  if [ -z "${NO_TORCH:-}" ]; then
    timeout 200 python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2> "$OUT/torch-anchor.err"; echo "torch rc=$?"; cut -c1-200 "$OUT/torch-anchor.jsonl"
  fi
  lap kernels
fi
if has 4; then
  timeout 300 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"; show_e2e "$OUT/bench-e2e.json"
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err *.csv.gz 2>/dev/null; rm -f *.log *.json *.err *.jsonl ncu-*.txt
