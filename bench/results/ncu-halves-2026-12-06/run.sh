#!/bin/bash
# run.sh - where k_attn_ws's decode waits with the half barriers (session 37; binaries:
# build.sh): ncu with source counters of one launch each of the bf16 decode (one block
# a group) and the fp8_ds_mla decode (clusters), for bench/ncu_lines.py. With carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh
. bench/device_common.sh
ncu_attn bf16 mainli decode '_Z9k_attn_wsILb0ELb0E'
lap ncu-bf16
ncu_attn fp8 mainli decode '_Z9k_attn_wsILb1ELb1E'
lap ncu-fp8
cd "$OUT" && tar czf all.tgz *.txt *.csv.gz 2>/dev/null; rm -f *.txt *.csv.gz
