#!/bin/bash
# build.sh - the fp8 decode's next call, prepared in session 35 (2026-12-06) and not run:
# main (HEAD) against the patches of pending/ (branches wip/arrive-final, wip/fp8-ahead8,
# wip/arrive-ahead). From the repository root on the build machine, a few minutes on two
# cores; stages .devrun/{main,arrive,ahead,regs,both} (test_gpu_kernels and
# gpu_bench_kernels, xz'd), .devrun/lib and the FlashMLA wheel; then run.sh on the device
# with carry [".devrun"]. (Took 3.6 minutes on 2026-12-06; 37 MB.)
#  - arrive: the consumers' release of the other block's slot with the default semantics
#    (release at CTA scope), one arrival a warp (main: .release.cluster by every thread,
#    12% of the fp8 decode's stall samples as memory-barrier waits, ncu 2026-12-06);
#  - ahead: the fp8 producer of clusters loads tile j + 1 before it dequantizes tile j,
#    with the roles' registers 208 / 176 / 120 (main 240 / 176 / 88; ptxas: no spills);
#  - regs: ahead's registers alone (-DWS_FP8_AHEAD=0);
#  - both: arrive and ahead.
export VARIANTS_DIR=bench/results/fp8-next-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant arrive "arrive" ""
build_variant ahead "ahead" ""
build_variant regs "ahead" "-DWS_FP8_AHEAD=0"
build_variant both "arrive-ahead" ""
stage_devrun main arrive ahead regs both
