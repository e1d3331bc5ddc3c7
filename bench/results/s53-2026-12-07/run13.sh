#!/bin/bash
# run13.sh (session 53; prepared, not run): pending/allpick.patch's whole check before it
# merges (c2 of this session ran only its indexer cases, kernel.indexer and bench e2e).
# Staged by build13.sh (.devrun/a: HEAD + allpick, .devrun/f: HEAD). Call with carry
# [".devrun"] and PART 1 (~7 min), then PART 2 (~4 min) while the machine is warm:
#  1. all of test_gpu_kernels of a, test_gpu_graphs / nccl / ipc under MPS of a, run
#     --verify of model-long's two 8k prompts at P2 N2 over ipc under MPS of a (two
#     ranks' cooperative grids at once, the waits changed), kernel.indexer f / a and bench
#     e2e f / a alternating twice;
#  2. compute-sanitizer memcheck of a's indexer cases (MC_T=220); model-long decoding
#     unprofiled at 64 and 131072 contexts (issue 20: the executor's summary now gives
#     replayed steps' host time apart from the prompt's step and the recordings).
# (Not the four-rank default-model runs of issue 20: their decode tokens' bound of keys,
# the block table's width, is a few hundred keys, one chunk, which selects in one block
# without the radix select: allpick cannot move them.)
. bench/device_common.sh
if has 1; then
  BIN=.devrun/a kernel_tests_all
  other_gpu_tests .devrun/a
  lap tests
  BIN=.devrun/a verify_long8k_ipc
  lap verify
  for r in 1 2; do indexer_env f f$r; indexer_env a a$r; done
  lap probes
  e2e_bf16_alternating 2 "f a"
  lap e2e
fi
if has 2; then
  BIN=.devrun/a MC_T=220 memcheck_indexer
  lap memcheck
  for ctx in 64 131072; do host_split_long .devrun/a $ctx; done
  lap host
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err *.txt 2>/dev/null
rm -f *.json *.jsonl *.log *.err
