#!/bin/bash
# build.sh - session 37's fourth experiment call (issue 19): main (HEAD) against
#  - pf256 (pending/l2hint.patch, branch wip/ws-l2hint): k_attn_ws's row loads ask L2
#    for 256 bytes a miss (ld.global.nc.L2::256B for fp8_ds_mla rows,
#    cp.async.cg...L2::256B for bf16 rows), as FlashMLA's sparse fp8 decode loads its
#    rows (load_128b_from_gmem<..., L2PrefetchHint::B256>);
#  - pf128: the same with L2::128B (-DWS_L2_PF_BYTES=128).
# From the repository root on the build machine; then run.sh with carry [".devrun"].
export VARIANTS_DIR=bench/results/l2hint-2026-12-06
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant pf256 "l2hint" ""
build_variant pf128 "l2hint" "-DWS_L2_PF_BYTES=128"
stage_devrun main pf256 pf128
