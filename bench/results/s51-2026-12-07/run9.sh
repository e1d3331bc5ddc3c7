#!/bin/bash
# run9.sh (session 51; prepared, not run): fused.patch, the indexer's scoring and radix
# select in one cooperative launch for few tokens of few heads over long ranges
# (k_idx_fused, cuda_indexer_fused.cu), against main. Why: a decode token over 128k keys
# cost ~38 us a layer in three kernels (ncu: scoring 17 us at a third of the HBM rate,
# the select 22, session 51's c5), and issue 18's TPOT at 128k stays 1.32-1.33x the
# 64-token one (c6). Estimate: ~20 us a layer, TPOT ratio ~1.2. Staged by build9.sh
# (.devrun/m: main; .devrun/f: main + fused.patch). Call with carry [".devrun"] and
# PART "1 2 3" (~6 min), then PART "4 5" (~5 min):
#  1. f's test_gpu_kernels, all of it (every indexer case of at most 8 heads also runs
#     the batch with the caller's bound, the fused path where it fits, against the
#     unfused picks; three new cases of 5, 8 and 16 tokens);
#  2. PyTorch's indexer, then kernel.indexer of m, f and f with SPARSECP_INDEXER_FUSED=0
#     alternating twice (the one-token rows over 32k / 128k keys, whose bound the bench
#     passes, take the fused path; the 64-head rows must not move);
#  3. bench e2e over bf16 rows, m and f alternating twice (TPOT at 32k / 128k);
#  4. memcheck of f's indexer cases;
#  5. run --verify of model-long's two 8k prompts at P2 N2 over NCCL and over ipc under
#     MPS (decode steps over 8k keys take the fused path beside other ranks' kernels),
#     test_gpu_graphs, test_gpu_nccl, test_gpu_ipc under MPS;
#  6. (with PART 4 5 or after) f's profiled steps at a 64-token and a 128k context, as
#     run5.sh PART 1: the fused 128k step's indexer stage, and the host's prepare split
#     into the index arrays' upload and the key list's fill (issue 20: 0.21 ms of prepare
#     a CUDA decode step against 0.002 on the CPU backend, session 51's c4).
. bench/device_common.sh
if has 1; then
  # (first a smoke test of a minute at most: the one-token rows over 32k and 128k keys
  # take the fused path; a fused kernel whose blocks never meet would hang here, not for
  # the tests' five minutes)
  indexer_env f smoke SC_BENCH_INDEXER_TOKENS=1
  [ -s "$OUT/idx-smoke.json" ] || { echo "smoke failed: stopping"; exit 1; }
  BIN=.devrun/f kernel_tests_all
  lap tests
fi
if has 2; then
  torch_indexer
  for r in 1 2; do
    indexer_env m main$r
    indexer_env f fused$r
    indexer_env f unfused$r SPARSECP_INDEXER_FUSED=0
  done
  lap probes
fi
if has 3; then
  e2e_bf16_alternating 2 "m f"
  lap e2e
fi
if has 4; then
  BIN=.devrun/f MC_T=${MC_T:-240} memcheck_indexer
  lap memcheck
fi
if has 5; then
  BIN=.devrun/f verify_long8k
  BIN=.devrun/f verify_long8k_ipc
  other_gpu_tests .devrun/f
  lap checks
fi
if has 6; then
  for ctx in 64 131072; do profile_long .devrun/f $ctx; done
  lap profile
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
