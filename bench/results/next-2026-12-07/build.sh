#!/bin/bash
# build.sh - the next call, prepared in session 37 (2026-12-06) for issues 19 and 20:
# main (HEAD) against
#  - pf2 (pending/pf2.patch, branch wip/fp8-pf2; issue 19): the fp8_ds_mla producer of
#    clusters, which bounds the fp8 decode (ncu by instruction, bench/kernels-cuda.md
#    session 37 call 7: it hardly waits for a slot, a quarter of its stall samples wait
#    on its row loads in spite of the one-tile look-ahead), fetches tile j + 2's row into
#    L2 as tile j begins (prefetch.global.L2, 1-2 a thread a tile);
#  - gpuscope (pending/gpuscope.patch, wip/ipc-gpu-scope; issue 20): the ipc rounds'
#    header words and publishing fences at GPU scope instead of system scope (four
#    fences and four acquire/release words a round, seven rounds a P4 N4 decode step,
#    whose collectives stage is ~0.3 ms of the four ranks' 0.57: bench/gpu-step.md);
#  - nosleep: gpuscope without the 128 ns pause between polls (-DIPC_SLEEP_NS=0).
# From the repository root on the build machine (~4 minutes on two cores, 40 MB); then run.sh
# with carry [".devrun"].
export VARIANTS_DIR=bench/results/next-2026-12-07
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
build_variant pf2 "pf2" ""
build_variant gpuscope "gpuscope" "" "sparsecp test_gpu_ipc"
build_variant nosleep "gpuscope" "-DIPC_SLEEP_NS=0" "sparsecp"
stage_devrun main pf2 gpuscope nosleep
# (the ipc variants' kernel tests and benches are main's: 9 MB the call need not carry)
rm -f .devrun/{gpuscope,nosleep}/{test_gpu_kernels,gpu_bench_kernels}.xz
du -sh .devrun
