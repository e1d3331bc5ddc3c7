#!/bin/bash
# Issue 18, the prefill indexer (2026-12-03, afternoon); outputs under $OUT (all.tgz).
#  PART=1: test_gpu_kernels (with the two fp8 few-heads cases of e97b2fd, never run
#    before), the split kernel's tile skip (.devrun against .devrun/old = 54d1f38) on
#    model-deep's TPOT, the default model's unprofiled host times, a profiled 32k bf16
#    prompt, the ring of 32-row slots (.devrun/v2), then ncu (full set, source counters;
#    .devrun/li built with -lineinfo) of the indexer's scoring and final top-K on
#    model-long's 32k prompt, and of the few-heads kernel's prefill.
#  PART=2: the indexer's changes (.devrun) against aa3e79f (.devrun/li) and with room
#    K + 4K (.devrun/p4); one stage and two blocks an SM (.devrun/s1); bench e2e.
#  PART=3: validation of the tree of b6de572.  PART=4: room K + 6K (.devrun/p6), ncu of
#    the final tree.  PART=5: after the review (bcb2cd6).
# The helpers moved to bench/device_common.sh after the calls; the commands are the ones
# that ran, except that PART 1's model-deep line printed a Python error instead of the
# token count (it read a field that is a number as a list).
. bench/device_common.sh

# cmp_attn NAME DIR: the 8-head bf16 attention cases, .devrun ("cur") and DIR, alternating, twice
cmp_attn() {
  for i in 1 2; do for v in cur $1; do
    bin=.devrun/gpu_bench_kernels; [ $v = $1 ] && bin=$2/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 90 $bin --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn "$OUT/kernels-attn-$v-$i.json" bf16
  done; done; lap attn
}
# cmp_indexer "NAME=DIR ..." [TOKENS]: kernel.indexer of each binary, alternating, twice
cmp_indexer() {
  for i in 1 2; do for nd in $1; do
    v=${nd%%=*}; bin=${nd#*=}/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=${2:-} timeout 120 $bin --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"
    echo "indexer $v $i rc=$?"; show_indexer "$OUT/kernels-indexer-$v-$i.json"
  done; done; lap kernels
}
tests_kernels() {
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|$1" "$OUT/test_kernels.log" | head
}
memcheck() { # CASES...
  for cs in "$@"; do
    SC_GPU_CASES=$cs timeout 100 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-$cs.log" 2>&1; echo "memcheck $cs rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$cs.log")"
  done; lap memcheck
}
# the default model unprofiled: the executor's host times at info level
default_run() {
  requests 4 500 "$OUT/req4.jsonl"
  SPARSECP_LOG=info timeout 60 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/default.json" 2> "$OUT/default.err"
  echo "default rc=$?"; grep -E "steps, each|between" "$OUT/default.err" | cut -c1-300; show_run "$OUT/default.json"
}
e2e() {
  timeout 200 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"; lap e2e
  show_e2e "$OUT/bench-e2e.json"
}
# ncu_indexer BIN: the 32k prompt's scoring and final top-K, full set with source counters
ncu_indexer() {
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=32768 timeout 200 ncu --clock-control none --set full --import-source yes \
    -k regex:'k_idx_tc|k_topk_final' --launch-count 2 -o "$OUT/idx32k" $1 --json > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
  ncu -i "$OUT/idx32k.ncu-rep" --page details > "$OUT/ncu-details.txt" 2>&1
  grep -E "k_idx_tc|k_topk_final|Duration|Throughput|Issued|Stall|Warp Cycles|Registers|Achieved Occ|Theoretical Occ" "$OUT/ncu-details.txt" | head -60
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source sass -k regex:k_idx_tc > "$OUT/ncu-src-idx.csv" 2>&1
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source cuda,sass -k regex:k_topk_final > "$OUT/ncu-src-final.csv" 2>&1
  gzip "$OUT"/ncu-src-*.csv; lap ncu
}

if has 1; then
  tests_kernels fp8; lap tests
  requests 4 2500 "$OUT/req4-deep.jsonl"
  for v in new old; do
    bin=.devrun/sparsecp; [ $v = old ] && bin=.devrun/old/sparsecp
    SPARSECP_LOG=info timeout 100 $bin run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --model examples/model-deep.json --requests "$OUT/req4-deep.jsonl" --clients 1 --json > "$OUT/deep-$v.json" 2> "$OUT/deep-$v.err"
    echo "model-deep $v rc=$?"; show_run "$OUT/deep-$v.json"
  done
  default_run; lap deep
  # a 32k prompt's step over bf16 rows, by stage (profiled; step 2, after run's warm-up)
  printf '{"prompt_len": 32768, "max_tokens": 4}\n' > "$OUT/req32k.jsonl"
  SPARSECP_LOG=info timeout 120 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --profile \
    --model examples/model-long.json --kv-format bf16 --requests "$OUT/req32k.jsonl" --token-budget 32768 --num-blocks 2176 \
    --max-model-len 32864 --deadline-ms 120000 > "$OUT/profile-32k-bf16.log" 2>&1; echo "profile rc=$?"
  grep "executor: rank 0: step 2:" "$OUT/profile-32k-bf16.log" | cut -c1-600
  cmp_attn v2 .devrun/v2 # a ring of five 32-row slots against two 64-row stages
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 120 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"; echo "kernels rc=$?"; show_indexer "$OUT/kernels-indexer.json"; lap kernels
  ncu_indexer .devrun/li/gpu_bench_kernels
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.prefill timeout 120 ncu --clock-control none -k regex:k_attn_few --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section SchedulerStats \
    .devrun/gpu_bench_kernels --json > "$OUT/ncu-few-prefill.txt" 2>&1; echo "ncu few rc=$?"; lap ncu-few
  grep -E "Throughput|Hit Rate|Duration|Stall|Warp Cycles|Bandwidth|Eligible|Issued" "$OUT/ncu-few-prefill.txt" | head -24
fi
if has 2; then
  tests_kernels FAIL; lap tests
  memcheck indexer topk
  cmp_indexer "old=.devrun/li new=.devrun p4=.devrun/p4"
  cmp_attn s1 .devrun/s1 # one 64-row stage and two blocks an SM against two stages and one block
  default_run
  e2e
fi
if has 3; then
  tests_kernels FAIL
  timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
  timeout 60 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$?"; lap tests
  memcheck attention indexer
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 120 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"; echo "indexer rc=$?"; show_indexer "$OUT/kernels-indexer.json"
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 90 .devrun/gpu_bench_kernels --json > "$OUT/kernels-attn.json" 2> "$OUT/kernels-attn.err"; echo "attn rc=$?"; show_attn "$OUT/kernels-attn.json"; lap kernels
  e2e
  for l in "f32 examples/model-long.json" "bf16 examples/model-long.json" "bf16 -"; do set -- $l
    n=default m=""; [ "$2" != - ] && n=$(basename $2 .json) m="--model $2"; f="$OUT/verify-$1-$n.log"
    timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $1 --verify $m > "$f" 2>&1
    echo "verify $1 $2 rc=$? $(tail -1 "$f")"
  done; lap verify
  default_run
fi
if has 4; then
  cmp_indexer "cur=.devrun p6=.devrun/p6" 32768
  ncu_indexer .devrun/li/gpu_bench_kernels
fi
if has 5; then
  tests_kernels merge
  default_run
  timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json > "$OUT/verify-bf16-model-long.log" 2>&1; echo "verify rc=$? $(tail -1 "$OUT/verify-bf16-model-long.log")"
fi
cd "$OUT" && tar czf all.tgz --exclude=all.tgz --exclude="*.ncu-rep" * && ls -la
