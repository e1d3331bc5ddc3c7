#!/bin/bash
# run.sh - session 37's second experiment call (binaries: build.sh; with carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh): the attention
# cases of sahead and regs, racecheck (three runs) and memcheck of sahead's, then
# kernel.sparse_attn of main / sahead / regs alternating twice, and FlashMLA. ~3 minutes.
. bench/device_common.sh
attention_cases sahead regs
for i in 1 2 3; do attn_sanitize racecheck sahead; done
attn_sanitize memcheck sahead
lap checks
attn_alternating main sahead regs
lap kernels
flashmla_anchor
lap flashmla
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
