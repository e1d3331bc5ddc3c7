#!/bin/bash
# build.sh - prepared in session 40 (2026-12-06) for the next session: main (8454967 or
# later: the top-K in position order) against fast (pending/fast.patch = branch
# wip/slots32: topk_to_slots in 32-bit arithmetic, four entries a thread, where six 64-bit
# divisions an entry made it 0.70 ms a layer of a 32k prompt; and the forward pass asks
# the indexer for scores only where a DCP merge or a capture reads them, not 512 MB a
# layer of a 32k prompt for nothing), with pending/tf32.patch (branch wip/gemm-tf32:
# SPARSECP_GEMM_TF32=1 puts cuBLAS's gemms on TF32 tensor cores; off unless set, so the
# one binary is both sides) and pending/norms.patch (branch wip/norm-warps: RMSNorm of
# rows up to 2048 wide by a warp a row, the 256-thread block's sums replayed to the bit;
# the 32k prompt's q_norm / kv_norm took 178 us a launch). From the repository root
# (~4 minutes).
export VARIANTS_DIR=bench/results/slots-2026-12-07
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" "" "sparsecp"
build_variant fast "fast tf32 norms" "" "sparsecp test_gpu_graphs"
stage_devrun main fast
