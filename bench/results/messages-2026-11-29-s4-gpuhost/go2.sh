#!/bin/bash
# session 4, call 2: does unrelated CPU load on other cores slow the untapped in-process
# rate (host-level contention), and the false-sharing fix against the previous build,
# interleaved tap measurement.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc $D/sc-fs $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r2; mkdir -p $P; (uptime; nproc) > $P/info.txt
spin() { for i in $(seq $1); do timeout 100 sh -c 'while :; do :; done' & done; }
for k in 0 1 3 0 6; do
  spin $k; sleep 0.5
  s=$(date +%s); SC_BENCH_MESSAGES_TAP=off SC_BENCH_MESSAGES_ONLY=inproc timeout 100 $W/sc bench messages --json > $P/off-spin$k-$(date +%s).json 2>>$P/err.txt
  echo "off spin$k rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
  pkill -f 'while :; do :; done'; wait 2>/dev/null
done
for b in sc-fs sc sc-fs; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 150 $W/$b bench messages --json > $P/inproc-$b-$(date +%s).json 2>>$P/err.txt; echo "$b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r2.tgz r2 && rm -rf $P
