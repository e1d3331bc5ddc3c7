#!/bin/bash
# session 4, call 7: messages from other nodes recorded by the receiving loop (sc-rl)
# against the io thread copying them as they arrive (sc-final, 3dbc40c): ipc and tcp,
# alternating builds; then one full run of sc-rl.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-final $D/sc-rl $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r7; mkdir -p $P; (uptime; nproc) > $P/info.txt
i=0
for b in sc-rl sc-final sc-rl sc-final; do i=$((i+1)); s=$(date +%s); SC_BENCH_MESSAGES_ONLY=ipc timeout 100 $W/$b bench messages --json > $P/$i-ipc-$b.json 2>>$P/err.txt; echo "$i ipc $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
s=$(date +%s); timeout 200 $W/sc-rl bench messages --json > $P/5-all-sc-rl.json 2>>$P/err.txt; echo "5 all sc-rl rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r7.tgz r7 && rm -rf $P
