#!/bin/bash
# session 4, call 3: the slot's count split into enq (senders) and deq (the loop), against
# the false-sharing fix alone, alternating in process; then ipc and tcp of the new build.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-fs $D/sc-ed $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r3; mkdir -p $P; (uptime; nproc) > $P/info.txt
for b in sc-ed sc-fs sc-ed sc-fs; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 150 $W/$b bench messages --json > $P/inproc-$b-$(date +%s).json 2>>$P/err.txt; echo "$b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
for t in ipc tcp; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=$t timeout 200 $W/sc-ed bench messages --json > $P/$t-sc-ed.json 2>>$P/err.txt; echo "$t rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r3.tgz r3 && rm -rf $P
