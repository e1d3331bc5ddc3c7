# run.sh - k_attn_few with its selection and q loaded in batches (branch wip/few-loads,
# 44830f0; compiled 2026-12-05, not yet run) against the same kernel before (main at
# 72b771c: the binaries in .devrun/pairs/ have its k_attn_few), one GPU. From the
# repository root on the GPU machine, the new binaries in .devrun/few/:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/few-loads/run.sh
#  PART=1: test_gpu_kernels' attention cases with the new binary (the 8-head cases take
#          k_attn_few), and memcheck of them.
#  PART=2: kernel.sparse_attn's 8-head cases (model-long's: a 4096-token prefill chunk,
#          decode tokens in 128-row splits), old and new alternating, twice.
#  PART=3: bench e2e --device cuda (model-long's TTFT at 32k and 128k, TPOT at 64, 32k
#          and 128k tokens of context), old and new alternating, then run --verify at
#          P2 N2 with bf16 rows over model-long with the new binary.
. bench/device_common.sh
NEW=${NEW:-.devrun/few} OLD=${OLD:-.devrun/pairs}
bin() { if [ "$1" = new ]; then echo $NEW; else echo $OLD; fi; }
if has 1; then
  SC_GPU_CASES=attention timeout 60 $NEW/test_gpu_kernels > "$OUT/test_attention.log" 2>&1
  echo "test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attention.log") ok"
  grep -E "FAIL|heads=8 " "$OUT/test_attention.log" | cut -c1-160 | head
  SC_GPU_CASES=attention timeout 120 compute-sanitizer --tool memcheck $NEW/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1
  echo "memcheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attention.log" | head -1)"
  lap tests
fi
if has 2; then
  for i in 1 2; do for v in old new; do
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 $(bin $v)/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn "$OUT/kernels-attn-$v-$i.json"
  done; done
  lap kernels
fi
if has 3; then
  for v in old new; do
    timeout 170 $(bin $v)/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-$v.json" 2> "$OUT/bench-e2e-$v.err"
    echo "e2e $v rc=$?"; show_e2e "$OUT/bench-e2e-$v.json"
  done
  timeout 60 $NEW/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json > "$OUT/verify-long.log" 2>&1
  echo "verify bf16 model-long rc=$? $(grep -E 'verify' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
