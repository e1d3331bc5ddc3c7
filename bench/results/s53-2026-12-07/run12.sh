#!/bin/bash
# run12.sh (session 53): session 52's run11.sh in two calls instead of three, for a
# session whose device starts kept failing (four refusals cost 360 s before any ran).
# (Order: what closes issue 18 first, a second e2e round last.)
# Staged by s52's build11.sh (.devrun/f: main aa102ee; .devrun/li: the same, -lineinfo).
#  1. (~7-8 min) issue 18's closing run: PyTorch's indexer and kernel.indexer, bench e2e
#     twice, all of test_gpu_kernels (with its case of four ranks a GPU, never run),
#     test_gpu_graphs / nccl / ipc under MPS, then run --verify of model-long's two 8k
#     prompts at P2 N2 over ipc under MPS (the run that needs ranks_per_gpu; aa102ee
#     changed how local_cluster derives it). Left out to fit one call after the device
#     time lost: the memcheck of the indexer (session 52's c2: 0 errors on the same
#     kernels; issue 18 does not ask for it) and the verify over host collectives
#     (passed in session 52's c1 and c3; nothing on its path changed since).
#  2. (~7 min) a = branch wip/allpick (build12.sh: the cooperative select's passes with
#     every block picking the bin itself from a histogram a pass) against f: the indexer
#     cases of test_gpu_kernels of a, kernel.indexer and bench e2e alternating twice;
#     then ncu source counters of f's k_idx_fused at 128k bf16 (scoring or select?) and
#     the host's prepare split unprofiled at 64 and 131072 contexts (issue 20).
. bench/device_common.sh
if has 1; then
  torch_indexer
  indexer_env f state
  lap probes
  e2e_bf16_alternating 1 f
  lap e2e
  BIN=.devrun/f kernel_tests_all
  other_gpu_tests .devrun/f
  lap tests
  for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
  BIN=.devrun/f verify_long8k_ipc
  lap verify
  # (a second round last: what a call cut short by the device time left loses first)
  mv "$OUT/e2e-f1.json" "$OUT/e2e-f0.json"; mv "$OUT/e2e-f1.err" "$OUT/e2e-f0.err"
  e2e_bf16_alternating 1 f
  lap e2e
fi
if has 2; then
  BIN=.devrun/a indexer_tests
  lap tests-a
  for r in 1 2; do indexer_env f f$r; indexer_env a a$r; done
  lap probes
  e2e_bf16_alternating 2 "f a"
  lap e2e
  export SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072
  # (k_idx_fused<1> is the bf16 rows' instance, 1 = SC_KFMT_BF16; its first two launches
  # are the bench's warm-ups)
  NCU_SKIP=2 ncu_src fused128k li '_Z11k_idx_fusedILi1EE'
  unset SC_BENCH_KERNELS_ONLY SC_BENCH_INDEXER_TOKENS SC_BENCH_INDEXER_KEYS
  lap ncu
  for ctx in 64 131072; do host_split_long .devrun/f $ctx; done
  lap host
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err *.txt *.csv.gz 2>/dev/null
rm -f *.json *.jsonl *.log *.err *.csv.gz
