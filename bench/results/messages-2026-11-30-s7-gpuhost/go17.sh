#!/bin/bash
# session 7, call 1: tap records written whole cache lines at a time (sc-lw: encode into
# a scratch buffer, copy into the batch through a line-sized staging area with
# non-temporal stores), the same with ordinary stores for the lines (sc-lwplain), against
# f2e0660 (sc-base); in process, alternating.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-base $D/sc-lw $D/sc-lwplain $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r17; mkdir -p $P; (date; uptime; nproc; grep -m1 "model name" /proc/cpuinfo) > $P/info.txt
T0=$(date +%s)
i=0
for r in 1 2 3 4 5 6; do
  for b in sc-base sc-lw sc-lwplain; do
    i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 540 ] || break 2
    s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 60 $W/$b bench messages --json > $P/$i-$b.json 2>>$P/err.txt
    echo "$i $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
  done
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r17.tgz r17 && rm -rf $P
