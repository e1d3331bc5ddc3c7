#!/bin/bash
# session 4, call 6: two full runs of the final build (every transport).
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-final $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r6; mkdir -p $P; (uptime; nproc) > $P/info.txt
for k in 1 2; do s=$(date +%s); timeout 270 $W/sc-final bench messages --json > $P/all-final-$k.json 2>>$P/err.txt; echo "all $k rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r6.tgz r6 && rm -rf $P
