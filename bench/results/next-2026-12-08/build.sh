#!/bin/bash
# build.sh - the next call, prepared in session 38 (2026-12-06) for issue 18: main
# against fbulk (pending/fbulk.patch, branch wip/few-bulk, -DFEW_BULK=1): the few-heads
# attention kernel (model-long's 8 heads over bf16 rows, ~32 of a 32k prompt's 75.6 ms
# TTFT on an H100) loads each selected row with one bulk copy (cp.async.bulk, 1152 bytes,
# warp 0's lanes a row each, completion on the stage's mbarrier) where its four warps
# issued 72 16-byte cp.async a row. Session 38 found the kernel's time 2.3x its compute
# alone (1.99 against 0.86 ms for a 4096-token chunk, the loads one 32-row tile ahead):
# whether the copy engine brings the rows in sooner is what the call tells. ptxas: 147 /
# 210 registers (prefill / decode), no spill. From the repository root (~4 minutes).
export VARIANTS_DIR=bench/results/next-2026-12-08
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant fbulk "fbulk" "-DFEW_BULK=1"
stage_devrun main fbulk
