#!/bin/bash
# session 5, call 3: the final build (sc-new: packs, tap batch reuse, direct decoder)
# against b8ad3bc (sc-base): bench codec, then full bench messages runs, alternating.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-base $D/sc-new $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r10; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
T0=$(date +%s)
for b in sc-base sc-new; do timeout 60 $W/$b bench codec --json > $P/codec-$b.json 2>>$P/err.txt; echo "codec $b rc=$?" >> $P/info.txt; done
i=0
for b in sc-new sc-base sc-new sc-base sc-new; do
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 450 ] || break
  s=$(date +%s); timeout 130 $W/$b bench messages --json > $P/$i-all-$b.json 2>>$P/err.txt
  echo "$i all $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r10.tgz r10 && rm -rf $P
