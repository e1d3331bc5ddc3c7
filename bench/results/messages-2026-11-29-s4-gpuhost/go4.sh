#!/bin/bash
# session 4, call 4: where the in-process tap's cost comes from. Experimental builds (not
# committed): x1 the receiving loop frees a tapped letter at once (marking and topic
# matching only); x2 chains go to the io thread, which frees them unencoded; x3 the io
# thread encodes into batches but sends nothing. sc-ed: the committed build (90a0d18).
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-ed $D/sc-x1 $D/sc-x2 $D/sc-x3 $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r4; mkdir -p $P; (uptime; nproc) > $P/info.txt
for b in sc-ed sc-x1 sc-x2 sc-x3 sc-ed; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 150 $W/$b bench messages --json > $P/inproc-$b-$(date +%s).json 2>>$P/err.txt; echo "$b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r4.tgz r4 && rm -rf $P
