#!/bin/bash
# run8.sh (session 51; prepared, not run): why a decode token's indexer op over 128k
# keys still costs ~38 us a layer, what issue 18's TPOT ratio at 128k (1.32-1.33 in
# session 51's c6) is made of. By ncu (session 51, c5): the scoring kernel k_idx_tc
# 16.7-17.0 us for 16.8 MB of bf16 keys (~1.0 TB/s, a third of the HBM rate; 256 blocks
# of 512 keys, four 128-key tiles in two stages each) and the cooperative select
# 21.1-22.1 us (two passes and the gather, each a count, a ticket, the last block's pick
# and a meet), the ranks then 6.1-6.3 (now inside it). Staged by build8.sh (.devrun/li,
# main with -lineinfo). One call, carry [".devrun"], ~3 min:
#  1. ncu --set full with source counters of each: k_idx_tc over the one-token row of
#     131072 bf16 keys (its third launch), and k_rsel_coop of the same row: where the
#     warps stall (the source lines and SASS most sampled), DRAM and L2 throughput,
#     eligible warps; read with bench/ncu_lines.py.
. bench/device_common.sh
if has 1; then
  export SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072
  # (the f32 row runs first: k_idx_tc's bf16 instance is another template, matched by
  # its FMT argument, 1 = SC_KFMT_BF16, as in session 51's c4 table; the select is the
  # same kernel for both rows and its keys the same count, so its third launch is f32's)
  NCU_SKIP=2 ncu_src score128k li '_Z8k_idx_tcILi64ELi1ELb1ELb0EE'
  NCU_SKIP=2 ncu_src coop128k li '_Z11k_rsel_coop'
  lap ncu
fi
cd "$OUT" && tar czf all.tgz *.txt *.csv.gz 2>/dev/null; rm -f *.txt *.csv.gz
