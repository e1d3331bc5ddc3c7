# run.sh - the indexer's ring of key stages (branch wip/idx-stages: tc_deepen adds
# stages while the blocks an SM holds stay as many), one H200; the call records its date
# in $OUT/gpu.txt. From the repository root on the GPU machine, binaries of the branch in
# .devrun/stages/ (gpu_bench_kernels, test_gpu_kernels, sparsecp):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/idx-stages-2026-12-05-h200/run.sh
#  PART=1: test_gpu_kernels' indexer cases (every format and shape against the CPU
#          reference, invariance), the ring at its deepest, then capped at 3 stages.
#  PART=2: kernel.indexer with SPARSECP_INDEXER_STAGES=2 (the launch of before: "s2")
#          and without ("ring"), on the 64-head shapes (16384 keys), and .devrun/w8pipe/gpu_bench_kernels where it is there
#          (branch wip/w8-pipe, two stages: "w8pipe"), alternating, twice; then the
#          PyTorch indexer.
#  PART=3: memcheck of the indexer cases.
#  PART=4: where a 32k prompt of examples/model-long.json goes (bf16 rows, P1 N1, NCCL,
#          --profile: each step's stages in the info log), ring and s2, a request each
#          after a warm-up request of the same length.
#  PART=5: ncu of the ring's scoring kernel over fp8_index keys (k_idx_tc<128, fp8, vec,
#          wgmma>, one launch after two), prefill shape then decode shape: speed of
#          light, warp states, scheduler, the stalls by source line (SASS).
. bench/device_common.sh
B=.devrun/stages
if has 1; then
  SC_GPU_CASES=indexer timeout 200 $B/test_gpu_kernels > "$OUT/test_indexer_ring.log" 2>&1
  echo "ring test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer_ring.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer_ring.log" | cut -c1-200 | head
  SPARSECP_INDEXER_STAGES=3 SC_GPU_CASES=indexer timeout 200 $B/test_gpu_kernels > "$OUT/test_indexer_s3.log" 2>&1
  echo "s3 test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer_s3.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer_s3.log" | cut -c1-200 | head
  if [ -x .devrun/w8pipe/test_gpu_kernels ]; then
    SC_GPU_CASES=indexer timeout 200 .devrun/w8pipe/test_gpu_kernels > "$OUT/test_indexer_w8pipe.log" 2>&1
    echo "w8pipe test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer_w8pipe.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer_w8pipe.log" | cut -c1-200 | head
  fi
  lap tests
fi
if has 2; then
  vs="s2 ring"; [ -x .devrun/w8pipe/gpu_bench_kernels ] && vs="s2 ring w8pipe"
  for i in 1 2; do for v in $vs; do
    st=8; [ $v = s2 ] && st=2
    bin=$B/gpu_bench_kernels; [ $v = w8pipe ] && bin=.devrun/w8pipe/gpu_bench_kernels
    SC_BENCH_INDEXER_KEYS=16384 SPARSECP_INDEXER_STAGES=$st SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 $bin --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"
    echo "indexer $v $i rc=$?"; show_indexer "$OUT/kernels-indexer-$v-$i.json"
  done; done
  timeout 100 python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2> "$OUT/torch-anchor.err"
  echo "torch rc=$?"; cut -c1-200 "$OUT/torch-anchor.jsonl"
  lap kernels
fi
if has 3; then
  SC_GPU_CASES=indexer timeout 300 compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1; echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log")"
  lap memcheck
fi
if has 4; then
  for v in ring s2; do
    st=8; [ $v = s2 ] && st=2
    printf '{"prompt_len": 32768, "max_tokens": 8, "seed": 1}\n{"prompt_len": 32768, "max_tokens": 8, "seed": 2, "arrive_ms": 4000}\n' > "$OUT/r32k.jsonl"
    SPARSECP_INDEXER_STAGES=$st SPARSECP_LOG=info timeout 120 $B/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
      --model examples/model-long.json --kv-format bf16 --token-budget 32768 --num-blocks 2304 --max-model-len 32896 \
      --profile --json --requests "$OUT/r32k.jsonl" > "$OUT/prof32k-$v.json" 2> "$OUT/prof32k-$v.err"
    echo "32k profile $v rc=$?"; show_run "$OUT/prof32k-$v.json"; grep -E "executor: rank 0: step" "$OUT/prof32k-$v.err" | awk '$8 + 0 > 5' | cut -c1-400
  done
  lap profile
fi
if has 5; then
  for sh in "1024 prefill" "128 decode"; do
    set -- $sh
    SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=$1 SC_BENCH_INDEXER_KEYS=16384 timeout 150 \
      ncu --clock-control none --kernel-name-base mangled -k regex:k_idx_tcILi128ELi4ELb1ELb1 --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section Occupancy \
      $B/gpu_bench_kernels --json > "$OUT/ncu-idx-$2.txt" 2>&1; echo "ncu $2 rc=$?"
    grep -E "Duration|Throughput|Issue Slots|Eligible|Active Warps|Stall|Warp Cycles|Achieved Occ|No Eligible" "$OUT/ncu-idx-$2.txt" | head -24
  done
  lap ncu
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.jsonl *.err
