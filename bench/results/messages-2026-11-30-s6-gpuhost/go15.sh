#!/bin/bash
# session 6, call 3: where the in-process tap's cost is. sc-fin2 (0289b8d); sc-xr (the
# receiving loop encodes each tapped letter into a discarded buffer: no batch, nothing
# published); sc-xn (the full path, but the io thread recycles each batch instead of
# sending it on the XPUB). Then sc-fin2 untapped with 0 and 3 busy shell loops beside it.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-fin2 $D/sc-xr $D/sc-xn $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r15; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
T0=$(date +%s)
i=0
for b in sc-fin2 sc-xn sc-xr sc-fin2 sc-xn sc-xr sc-fin2 sc-xn sc-xr; do
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 300 ] || break
  s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 70 $W/$b bench messages --json > $P/$i-$b.json 2>>$P/err.txt
  echo "$i $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
for busy in 0 3 0 3; do
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 420 ] || break
  pids=""; for k in $(seq 1 $busy); do sh -c 'while :; do :; done' & pids="$pids $!"; done
  s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc SC_BENCH_MESSAGES_TAP=off timeout 70 $W/sc-fin2 bench messages --json > $P/$i-busy$busy.json 2>>$P/err.txt
  echo "$i busy$busy rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
  [ -n "$pids" ] && kill $pids; wait 2>/dev/null
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r15.tgz r15 && rm -rf $P
