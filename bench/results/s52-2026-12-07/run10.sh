#!/bin/bash
# run10.sh (session 52): the fused indexer (session 51's fused.patch) with cooperative
# grids sized to a rank's share of the SMs (sc_kernels_cuda_set_gpu_ranks, the pipeline's
# "ranks_per_gpu"), after c2's run --verify over ipc under MPS at P2 N2 timed out with
# every rank's fused grid taking one block on every SM. .devrun/f: that tree (build/'s
# binaries, xz'd, beside session 51's .devrun/lib). PART 1 (~5 min): the verify runs
# (host collectives under MPS; ipc under MPS), PyTorch's indexer and kernel.indexer,
# bench e2e, the indexer cases of test_gpu_kernels; PART 2: the other GPU tests and the
# whole of test_gpu_kernels.
. bench/device_common.sh
# (PART 1 first: c3 of this session failed to start, leaving time for one short call)
if has 1; then
  BIN=.devrun/f verify_long8k
  BIN=.devrun/f verify_long8k_ipc
  lap verify
  torch_indexer
  indexer_env f fused
  lap probes
  e2e_bf16_alternating 1 f
  lap e2e
  BIN=.devrun/f indexer_tests
  lap tests
fi
if has 2; then
  other_gpu_tests .devrun/f
  lap checks
  BIN=.devrun/f kernel_tests_all
  lap tests
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log *.err 2>/dev/null; rm -f *.json *.jsonl *.log *.err
