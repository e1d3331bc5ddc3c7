#!/bin/bash
# run.sh - (binaries: build.sh; with carry [".devrun"]: export
# LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh): pf2's attention cases and memcheck,
# kernel.sparse_attn of main and pf2 alternating twice, FlashMLA. ~1.5 minutes.
. bench/device_common.sh
attention_cases pf2
attn_sanitize memcheck pf2
lap checks
attn_alternating main pf2
lap kernels
flashmla_anchor
lap flashmla
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
