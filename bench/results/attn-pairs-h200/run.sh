# run.sh - the warpgroup-role attention kernels side by side with FlashMLA on one GPU:
# k_attn_ws (cuda_attn_ws.cu), k_attn_pairs (cuda_attn_pairs.cu: tiles in pairs, slots
# handed over by halves, over fp8_ds_mla rows at 128 heads clusters of two blocks) and
# k_attn_wg; first run in session 31 (2026-12-05, one H100: bench/kernels-cuda.md, raw in
# bench/results/attn-pairs-2026-12-05-h100/). The call records the GPU and date in
# $OUT/gpu.txt. From the repository root on the GPU machine, the binaries in
# .devrun/pairs/ (test_gpu_kernels, gpu_bench_kernels, test_gpu_graphs, sparsecp), the
# sgl-flash-mla wheel in .devrun/whl (bench/attn_anchor.sh prepare):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/attn-pairs-h200/run.sh
# Variants (kernel_env): "auto" the default choice (k_attn_ws, the pairs over fp8 rows in
# clusters), "ws" and "pairs" always that kernel, "wsflat" k_attn_ws without clusters,
# "flat" the pairs without clusters, "hints" the pairs with FlashMLA's L2 hints, "wg"
# k_attn_wg; "pairs1", "fast", "fastq", "wscross", "wspipe" and "few" are the default
# choice of the builds in their own .devrun folders. (In the logs of session 31's
# calls 1-3, before the default changed, "pairs" had the hints on and "nohints" was
# today's "pairs".)
#  PART=1: test_gpu_kernels' attention cases (against the CPU reference; a token batched
#          and alone bit for bit) with each of $TESTED.
#  PART=2: kernel.sparse_attn of each of $BENCHED, alternating, twice.
#  PART=3: FlashMLA's sparse kernels on the same shapes (bench/attn_anchor.py flashmla).
#  PART=4: compute-sanitizer memcheck, racecheck and synccheck of the attention cases,
#          and racecheck again without clusters (racecheck ran past 100 s on an H100).
#  PART=5: the pipeline: run --verify at P2 N2 on one GPU with bf16 rows over a 2-layer
#          model of model-deep's shape (128 heads), then all of test_gpu_kernels and
#          test_gpu_graphs.
#  PART=6: model-deep decode TPOT, bf16 rows, P1 N1, NCCL (4 requests of 64 + 64 tokens,
#          2.5 s apart), SPARSECP_ATTN_PAIRS=0 and 1 in turn, twice.
#  PART=7: ncu of one launch of each of $PROFILED on the decode and prefill cases: speed
#          of light, memory, warp states and the stall reasons.
#  PART=8: (issue 20, beside) the default model's decode TPOT at P4 N4 over ipc under MPS
#          with each client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 100, 50 and 25 in turn,
#          and one rank (NCCL), twice: whether four ranks' kernels interfere less when
#          each may fill only part of the GPU (2.05-2.20x one rank so far; goal 2x).
# (k_attn_pairs and its switches left main in fcc5c62 (session 32): from then on the
# variants "pairs", "flat" and "hints" run k_attn_ws; build d6729c2 to compare them
# again. Session 32's script: ../attn-ws-2026-12-05-h200/.)
. bench/device_common.sh
B=${B:-.devrun/pairs} # (the binaries under test; B=.devrun/wscross for branch wip/ws-cross)
# kernel_env V: the environment that picks attention kernel V; bin_dir V: its binaries
kernel_env() {
  case $1 in
    wg) echo SPARSECP_ATTN_WS=0 ;; ws) echo SPARSECP_ATTN_PAIRS=0 ;; pairs) echo SPARSECP_ATTN_PAIRS=1 ;;
    wsflat) echo SPARSECP_ATTN_PAIRS=0 SPARSECP_ATTN_CROSS=0 ;;
    flat) echo SPARSECP_ATTN_PAIRS=1 SPARSECP_ATTN_CROSS=0 ;;
    hints) echo SPARSECP_ATTN_PAIRS=1 SPARSECP_ATTN_HINTS=1 ;; *) echo SPARSECP_ATTN_WS=1 ;;
  esac
}
bin_dir() { case $1 in pairs1|fast|fastq|wscross|wspipe|few) echo .devrun/$1 ;; *) echo $B ;; esac; }
# (on branch wip/ws-cross k_attn_ws takes fp8 rows in clusters too: "ws" and "auto" are
# it, "wsflat" without clusters, "pairs" the pairs' clusters)
TESTED=${TESTED:-auto pairs flat ws}
BENCHED=${BENCHED:-wg ws pairs auto}
# (parts run in the order 1 2 3 7 5 4 6 8: the sanitizers last of the checks, being the
# slowest)
# (the attention cases took 2 s and a benchmark pass 7 s in session 29: a kernel that
# hangs costs its timeout, and a variant whose tests fail is left out of the benchmark)
touch "$OUT/failed_variants"
if has 1; then
  for v in $TESTED; do
    env $(kernel_env $v) SC_GPU_CASES=attention timeout 60 $(bin_dir $v)/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
    rc=$?; echo "$v test_gpu_kernels attention rc=$rc $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"
    [ $rc = 0 ] || echo $v >> "$OUT/failed_variants"
    grep -E "FAIL|not ok|attn .*(heads=(64|128)|ramp)" "$OUT/test_attention_$v.log" | cut -c1-200 | head -14
  done
  lap tests
fi
if has 2; then
  for i in 1 2; do for v in $BENCHED; do
    if grep -qx $v "$OUT/failed_variants"; then echo "attn $v $i: skipped (tests failed)"; continue; fi
    env $(kernel_env $v) SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 $(bin_dir $v)/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
  done; done
  lap kernels
fi
if has 3; then
  flashmla_anchor
  lap flashmla
fi
if has 7; then
  for v in ${PROFILED:-pairs ws}; do
    if grep -qx $v "$OUT/failed_variants"; then continue; fi
    for c in decode prefill; do
      env $(kernel_env $v) SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.$c timeout 120 ncu --clock-control none -k regex:k_attn_ --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
        --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
        $(bin_dir $v)/gpu_bench_kernels --json > "$OUT/ncu-$v-$c.txt" 2>&1; echo "ncu $v $c rc=$?"
      grep -E "void k_attn|Duration|Compute \(SM\) Th|L2 Hit|Eligible Warps|Warp Cycles Per Issued" "$OUT/ncu-$v-$c.txt" | head -8 | cut -c1-110
      grep -E "issue_stalled" "$OUT/ncu-$v-$c.txt" | awk '$NF+0 >= 0.15' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-90
    done
  done
  lap ncu
fi
if has 5; then
  attn_pipeline_checks $B
  lap pipeline
fi
if has 4; then
  for tool in memcheck racecheck synccheck; do
    SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool $tool $B/test_gpu_kernels > "$OUT/$tool-attention.log" 2>&1
    echo "$tool attention rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/$tool-attention.log" | head -2)"
  done
  # (again without clusters, in case the tool does not follow distributed shared memory)
  SPARSECP_ATTN_CROSS=0 SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool racecheck $B/test_gpu_kernels > "$OUT/racecheck-flat-attention.log" 2>&1
  echo "racecheck (flat) attention rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-flat-attention.log" | head -1)"
  lap sanitizer
fi
if has 6; then
  deep_tpot_alternating SPARSECP_ATTN_PAIRS $B
  lap deep
fi
if has 8; then
  requests 4 500 "$OUT/req4.jsonl"
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --collectives ipc --clients 1 --json --requests $OUT/req4.jsonl"
  for i in 1 2; do
    for pct in 100 50 25; do
      f="$OUT/p4-ipc-pct$pct-$i"
      CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct SPARSECP_LOG=info timeout 150 $B/sparsecp run $p4 > "$f.json" 2> "$f.err"
      echo "P4 N4 ipc, active threads $pct% $i rc=$?"; show_run "$f.json"
    done
    f="$OUT/one-$i"
    SPARSECP_LOG=info timeout 100 $B/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "one rank $i rc=$?"; show_run "$f.json"
  done
  lap mps-threads
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.jsonl *.err
