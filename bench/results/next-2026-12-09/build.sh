#!/bin/bash
# build.sh - the next call, prepared in session 39 (2026-12-06) for issue 18: main against
# notop (branch wip/idx-notop, pending/notop.patch): behind a sampled floor the full
# pass's appends stop keeping each token's largest score word (two reduce_max a
# half-warp pair and a shared atomicMax every append round: ~8% of the pass's stall
# samples, ncu of main fd6cd15, results/state-2026-12-06c/call1), and a cut or the end's
# select finds the largest itself (ptxas: 112-128 registers, no spill); with it dcpmax
# (pending/dcpmax.patch, the branch's second commit): the DCP prefill's indexer call gets
# its chunk's extent as max_keys, so a long prompt's chunks take the floors at N > 1 too
# (no effect at P1 N1). And sortsw (branch wip/sort-swizzle, pending/sortsw.patch): the
# register bitonic sort's exchanges across warps in xor-swizzled shared-memory slots,
# where in order they were 8-way bank conflicts (the sort, k_topk_final, was 2.6 of a 32k
# prompt's 10.8 ms indexer, its largest stall "mio"); sort128 (pending/sortsw.patch and
# sort128.patch, the branch's second commit): and a one-list finish of 1024-2048 keys
# on 128 threads, 16 keys a thread (5 fewer shuffle stages, 3 fewer through shared
# memory). From the repository root (~6 minutes).
export VARIANTS_DIR=bench/results/next-2026-12-09
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
build_variant notop "notop dcpmax" "" "sparsecp"
build_variant sortsw "sortsw" ""
build_variant sort128 "sortsw sort128" ""
stage_devrun main notop sortsw sort128
