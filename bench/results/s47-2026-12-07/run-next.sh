#!/bin/bash
# run-next.sh (prepared in session 47 for the next call; build-next.sh stages it):
# .devrun/m = main with groups of 4 merged (0dd299d or later). Parts, in order:
#  1. the GPU tests the merge has not run: test_gpu_graphs, test_gpu_nccl, test_gpu_ipc
#     under MPS (test_gpu_kernels passed in session 47's c3: 25 ok);
#  2. kernel.indexer with the group capped at 4 and 8 (the cap drops the token-count
#     rule and the dense path) and with the dense path off, then main as it is: whether
#     the 128 decode tokens over one shared context (decode_shared, PyTorch's problem;
#     bf16 keys 7.9x its time, where groups of 2 gave 175 against 212 us in c1) reach
#     10x in groups;
#  3. PyTorch's indexer (bench/indexer_ref.py) for the ratios of that call;
#  4. run --verify P2 N2 (default model, f32 and bf16 rows) and model-long's two 8k
#     prompts.
. bench/device_common.sh
if has 1; then
  other_gpu_tests .devrun/m
  lap tests
fi
if has 2; then
  indexer_env m g4 SPARSECP_INDEXER_GROUP=4
  indexer_env m g8 SPARSECP_INDEXER_GROUP=8
  indexer_env m nodense SPARSECP_INDEXER_DENSE=0
  indexer_env m main
  lap probes
fi
if has 3; then
  timeout 150 /opt/torch/.venv/bin/python3 bench/indexer_ref.py --only h64 > "$OUT/torch-anchor.jsonl" 2>&1
  echo "PyTorch anchor rc=$?"; grep -E '"H": 64' "$OUT/torch-anchor.jsonl" | cut -c1-200
  lap torch
fi
if has 4; then
  BIN=.devrun/m verify_p2n2
  BIN=.devrun/m verify_long8k
  lap verify
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log 2>/dev/null; rm -f *.json *.jsonl *.log
