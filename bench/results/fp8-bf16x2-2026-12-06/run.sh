#!/bin/bash
# run.sh - session 36's sixth call (binaries: stage.sh; carry [".devrun"]): b2's attention
# cases, then kernel.sparse_attn of main and b2 alternating twice (~1 minute).
. bench/device_common.sh
attention_cases b2
attn_alternating main b2
lap kernels
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
