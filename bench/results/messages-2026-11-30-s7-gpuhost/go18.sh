#!/bin/bash
# session 7, call 6: the committed code (276cb19: the round trip echoes the payload), two
# full runs of `bench messages --json`.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-final $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r18; mkdir -p $P; (date; uptime; nproc; grep -m1 "model name" /proc/cpuinfo) > $P/info.txt
for i in 1 2; do
  s=$(date +%s); timeout 200 $W/sc-final bench messages --json > $P/$i-sc-final.json 2>>$P/err.txt
  echo "$i rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r18.tgz r18 && rm -rf $P
