#!/bin/bash
# run11.sh (session 52; prepared, not run): issue 18's state of main with the fused
# decode indexer and the cooperative grids by ranks_per_gpu (4c04920 on), every goal and
# check from one warm machine, then where the fused kernel's time goes. Staged by
# build11.sh (.devrun/f: HEAD; .devrun/li: HEAD with -lineinfo). Call with carry
# [".devrun"] and PART 1 (~4-6 min), then PART 2 (~7 min), then PART 3 (~2-3 min),
# each while the machine is still warm (it idles out 30 s after a call):
#  1. PyTorch's indexer and kernel.indexer (prefill and decode ratios), bench e2e twice
#     (TTFT at 32k / 128k, TPOT ratios), run --verify of model-long's two 8k prompts at
#     P2 N2 with host collectives and over ipc under MPS (ranks_per_gpu 2);
#  2. the whole of test_gpu_kernels (its case of four ranks a GPU never ran: session 52's
#     c3 ran out of time), test_gpu_graphs, test_gpu_nccl, test_gpu_ipc under MPS,
#     memcheck of the indexer cases;
#  3. ncu with source counters of k_idx_fused over the one-token row of 131072 bf16 keys:
#     it saved ~1.5 us of the ~20 that the three kernels' ncu times suggested (session
#     52's c1), and the e2e profile puts it at ~40 us a call: scoring or select? Then
#     model-long decoding at 64 and 128k contexts unprofiled (the executor's summary:
#     the host's prepare split without CUPTI's tracing), and profiled at 64.
. bench/device_common.sh
if has 1; then
  torch_indexer
  indexer_env f state
  lap probes
  e2e_bf16_alternating 2 f
  lap e2e
  BIN=.devrun/f verify_long8k
  BIN=.devrun/f verify_long8k_ipc
  lap verify
fi
if has 2; then
  BIN=.devrun/f kernel_tests_all
  other_gpu_tests .devrun/f
  lap tests
  BIN=.devrun/f MC_T=200 memcheck_indexer
  lap memcheck
fi
if has 3; then
  export SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072
  # (k_idx_fused<1> is the bf16 rows' instance, 1 = SC_KFMT_BF16, as in session 52's
  # profile; its first two launches are the bench's warm-ups)
  NCU_SKIP=2 ncu_src fused128k li '_Z11k_idx_fusedILi1EE'
  unset SC_BENCH_KERNELS_ONLY SC_BENCH_INDEXER_TOKENS SC_BENCH_INDEXER_KEYS
  lap ncu
  # (issue 20: a profiled step's prepare is ~0.25 ms, nearly all "index uploads", one
  # cudaMemcpyAsync of ~4 KB from pinned staging, where the CPU takes 0.002; CUPTI's
  # tracing in a profiled run slows the host's CUDA calls: the same runs unprofiled)
  for ctx in 64 131072; do host_split_long .devrun/f $ctx; done
  profile_long .devrun/f 64
  lap host
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err *.txt *.csv.gz 2>/dev/null
rm -f *.json *.jsonl *.log *.err *.csv.gz
