#!/bin/bash
# session 6, call 1: where a tap record's encoding costs less, in process, 16 B and 1 KiB:
# sc-fin2 (0289b8d), sc-xs (the sender encodes each tapped local send into a discarded
# buffer; nothing is recorded or published), sc-xr (the receiving loop does the same
# instead of the tap path), alternating.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-fin2 $D/sc-xs $D/sc-xr $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r13; mkdir -p $P; (date; uptime; nproc; lscpu | head -20) > $P/info.txt
T0=$(date +%s)
i=0
for b in sc-fin2 sc-xs sc-xr sc-fin2 sc-xs sc-xr sc-fin2 sc-xs sc-xr; do
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 420 ] || break
  s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 90 $W/$b bench messages --json > $P/$i-$b.json 2>>$P/err.txt
  echo "$i $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r13.tgz r13 && rm -rf $P
