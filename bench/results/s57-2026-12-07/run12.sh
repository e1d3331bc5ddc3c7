#!/bin/bash
# run12.sh (session 57): the DCP top-K merge at the real top-K (2048) and the merge of
# few blocks 1024 threads wide (.devrun/w: main eb367ec + cuda_topk.cu's TOPK_THREADS_WIDE,
# uncommitted when staged; SPARSECP_TOPK_WIDE=0 gives 256 threads in the same binary):
# 1. test_gpu_kernels' top-K merge cases (both widths); 2. kernel.topk (128 tokens, and 4
# tokens as a decode step's) at both widths, twice; 3. model-long (top-K 2048) after a
# 16k prompt, 64 new tokens: TPOT at P2 N2 over ipc with both widths and at P1 N1, once;
# 4. the default model at P4 N4 over ipc with both widths and one rank, two rounds; 5.
# model-long profiled at P1 N1 and P2 N2 (CUPTI's costliest ops) (~3.5 min, in order of
# what matters: a short call loses the last).
. bench/device_common.sh
SC_GPU_CASES=topk_merge timeout 100 .devrun/w/test_gpu_kernels > "$OUT/test_topk.log" 2>&1
echo "test_gpu_kernels topk_merge rc=$? $(grep -c '^ok' "$OUT/test_topk.log") ok"; grep -E "FAIL|not ok|merge tok" "$OUT/test_topk.log" | cut -c1-150 | head -12
lap tests
for r in 1 2; do for wide in 1 0; do
  SPARSECP_TOPK_WIDE=$wide SC_BENCH_KERNELS_ONLY=kernel.topk timeout 100 .devrun/w/gpu_bench_kernels --json > "$OUT/topk-$wide-$r.json" 2> "$OUT/topk-$wide-$r.err"
  echo "kernel.topk wide=$wide $r rc=$?"; python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for r in d['results']:
    print('  ', r['name'], r['params'].get('tokens'), 'tokens: median', r['median'], 'min', r['min'], r['unit'])
" "$OUT/topk-$wide-$r.json" 2>&1 | cut -c1-200
done; done
lap topk
printf '{"prompt_len": 16384, "max_tokens": 64, "seed": 7}\n' > "$OUT/req16k.jsonl"
long_run() { # P N COLL MPS WIDE EXTRA... -> $OUT/long-P$1-w$5.*
  local p=$1 n=$2 coll=$3 mps=$4 wide=$5; shift 5
  SPARSECP_TOPK_WIDE=$wide SPARSECP_LOG=info timeout 120 .devrun/w/sparsecp run --device cuda --gpus 1 --pcp $p --dcp $n \
    --collectives $coll --mps $mps --model examples/model-long.json --kv-format bf16 \
    --token-budget 16384 --max-model-len 16512 --num-blocks 2200 --requests "$OUT/req16k.jsonl" "$@"
}
for r in 1; do
  for wide in 1 0; do
    long_run 2 2 ipc on $wide --json > "$OUT/long-P2-w$wide-$r.json" 2> "$OUT/long-P2-w$wide-$r.err"
    echo "16k P2 N2 wide=$wide $r rc=$?"; show_run "$OUT/long-P2-w$wide-$r.json"
  done
  long_run 1 1 nccl off 1 --json > "$OUT/long-P1-$r.json" 2> "$OUT/long-P1-$r.err"
  echo "16k P1 N1 $r rc=$?"; show_run "$OUT/long-P1-$r.json"
done
lap long
requests 4 500 "$OUT/req4.jsonl"
for r in 1 2; do
  for wide in 1 0; do
    SPARSECP_TOPK_WIDE=$wide timeout 60 .devrun/w/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on \
      --collectives ipc --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/p4-w$wide-$r.json" 2> "$OUT/p4-w$wide-$r.err"
    echo "P4 N4 wide=$wide $r rc=$?"; show_run "$OUT/p4-w$wide-$r.json"
  done
  timeout 60 .devrun/w/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --collectives nccl --clients 1 --json \
    --requests "$OUT/req4.jsonl" > "$OUT/one-$r.json" 2> "$OUT/one-$r.err"
  echo "one rank $r rc=$?"; show_run "$OUT/one-$r.json"
done
lap p4
for lay in "1 1 nccl off" "2 2 ipc on"; do
  set -- $lay
  long_run $1 $2 $3 $4 1 --profile > "$OUT/long-prof-P$1.log" 2>&1
  echo "profiled 16k P$1 N$2 rc=$?"; grep -E "cuda: +[0-9]" "$OUT/long-prof-P$1.log" | head -12 | sed 's/^.*cuda:/cuda:/' | cut -c1-150
done
lap prof
cd "$OUT" && tar czf merge.tgz *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
