#!/bin/bash
# run.sh - session 37's third experiment call (binaries: build.sh; with carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh): rebal3's attention
# cases, its racecheck (roles) and memcheck, kernel.sparse_attn of main and rebal3
# alternating three times, FlashMLA. ~2 minutes.
. bench/device_common.sh
attention_cases rebal3
attn_sanitize racecheck rebal3
attn_sanitize memcheck rebal3
lap checks
attn_alternating main rebal3
attn_alternating main rebal3 | sed 's/ \([12]\) rc/ \1+2 rc/'
lap kernels
flashmla_anchor
lap flashmla
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
