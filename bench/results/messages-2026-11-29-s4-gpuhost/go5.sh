#!/bin/bash
# session 4, call 5: the receiving loop encodes tapped letters straight into its batches
# (sc-le) against handing whole letters to the io thread (sc-ed, 90a0d18), alternating in
# process; then ipc and tcp of sc-le.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-ed $D/sc-le $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r5; mkdir -p $P; (uptime; nproc) > $P/info.txt
for b in sc-le sc-ed sc-le sc-ed; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 150 $W/$b bench messages --json > $P/inproc-$b-$(date +%s).json 2>>$P/err.txt; echo "$b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
for t in ipc tcp; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=$t timeout 200 $W/sc-le bench messages --json > $P/$t-sc-le.json 2>>$P/err.txt; echo "$t rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r5.tgz r5 && rm -rf $P
