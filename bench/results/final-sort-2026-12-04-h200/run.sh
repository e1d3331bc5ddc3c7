# run.sh - k_topk_final sorting only the power of two that covers a token's keys (a decode
# token at a short context: a few dozen keys of K = 2048), 2026-12-04, one H200. From the
# repository root on the GPU machine, binaries in .devrun/ (.devrun/base/: main before it):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/final-sort-2026-12-04-h200/run.sh
#  PART=1: validation: test_gpu_kernels, test_gpu_graphs, run --verify at P2 N2.
#  PART=2: default model decode TPOT at one rank (4 requests 500 ms apart), the binaries of
#          BINS (default "new base") in turn, ROUNDS times (default 3).
#  PART=3: bench e2e --device cuda of each binary of E2E (default "new").
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
if has 1; then
  gpu_tests
  verify_p2n2
  lap validation
fi
if has 2; then
  for ((i = 1; i <= ${ROUNDS:-3}; i++)); do for v in ${BINS:-new base}; do
    timeout 100 "$(bin_of sparsecp "$v")" run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json --requests "$OUT/req4.jsonl" > "$OUT/one-$v-$i.json" 2> "$OUT/one-$v-$i.err"
    echo "one rank $v $i rc=$?"; show_run "$OUT/one-$v-$i.json"
  done; done
  lap tpot
fi
if has 3; then
  for v in ${E2E:-new}; do
    timeout 300 "$(bin_of sparsecp "$v")" bench e2e --device cuda --json > "$OUT/bench-e2e-$v.json" 2> "$OUT/bench-e2e-$v.err"; echo "e2e $v rc=$?"; show_e2e "$OUT/bench-e2e-$v.json"
  done
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.err *.jsonl
