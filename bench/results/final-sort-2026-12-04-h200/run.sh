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
  tpot_alternating "${ROUNDS:-3}" "${BINS:-new base}" "$OUT/req4.jsonl"
  lap tpot
fi
if has 3; then
  e2e_each "${E2E:-new}"
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.err *.jsonl
