#!/bin/bash
# build.sh - the next call for issue 19, prepared in session 36 (2026-12-06) and not run:
# main (HEAD) against
#  - halves (pending/halves.patch, branch wip/ws-halves): each slot's full barrier in two
#    halves, the tile's column blocks 0-3 and 4-8; WG0 issues S's first 16 k-steps once
#    the first half has landed and waits for the second while they run (FlashMLA's sparse
#    prefill hands its K tiles over so); for every case, bf16 and fp8;
#  - l2 (pending/l2.patch, wip/ws-l2ahead): the producer fetches the next tile's rows into
#    L2 (cp.async.bulk.prefetch.L2, one instruction a row) before it waits for the slot, so
#    the copies issued once the slot is free find them there (over fp8 rows in clusters
#    the rows of the tile after the look-ahead's);
#  - hl2 (pending/halves-l2.patch, wip/halves-l2): halves and l2 together;
#  - idxl2 (pending/idxl2.patch, wip/idx-l2ahead, issue 18): the indexer's scoring blocks
#    fetch the rows of the key tile after next into L2 as they read its list entries (the
#    decode shape reads its keys at ~2 TB/s of the 4.8, tiles one at a time);
#  - b2 (pending/b2.patch, wip/fp8-bf16x2): FlashMLA's dequantization, bf16x2 multiplies by
#    the scale rounded to bf16 (5 instructions a pair against 6; a numerics change).
# main's sparsecp too, for issue 18's TPOT ratio over f32 rows (bench e2e --kv-format f32).
# From the repository root on the build machine (a few minutes on two cores); stages
# .devrun/{main,halves,l2,hl2,idxl2,b2} and the FlashMLA wheel; then run.sh with carry [".devrun"].
export VARIANTS_DIR=bench/results/next-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
build_variant halves "halves" ""
build_variant l2 "l2" ""
build_variant hl2 "halves-l2" ""
build_variant idxl2 "idxl2" ""
build_variant b2 "b2" ""
stage_devrun main halves l2 hl2 idxl2 b2
