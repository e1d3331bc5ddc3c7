#!/bin/bash
# session 5, call 4: the final build (sc-fin: records of remote letters copied from the
# received bytes) against call 3's sc-new (re-encoded): full runs, alternating.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-new $D/sc-fin $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r11; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
T0=$(date +%s)
i=0
for b in sc-fin sc-new sc-fin sc-new; do
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 330 ] || break
  s=$(date +%s); timeout 120 $W/$b bench messages --json > $P/$i-all-$b.json 2>>$P/err.txt
  echo "$i all $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r11.tgz r11 && rm -rf $P
