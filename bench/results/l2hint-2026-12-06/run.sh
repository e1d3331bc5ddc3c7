#!/bin/bash
# run.sh - session 37's fourth experiment call (binaries: build.sh; with carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh): the attention
# cases of pf256 and pf128, memcheck of pf256's, kernel.sparse_attn of main / pf256 /
# pf128 alternating twice, FlashMLA. ~2 minutes.
. bench/device_common.sh
attention_cases pf256 pf128
attn_sanitize memcheck pf256
lap checks
attn_alternating main pf256 pf128
lap kernels
flashmla_anchor
lap flashmla
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
