#!/bin/bash
# session 5, call 1: packs (sc-pool: packs + tap batch reuse) against b8ad3bc (sc-base),
# full runs; in process only: x3 (packs, no reuse), x1 (records encoded, never shipped),
# x2 (shipped, the io thread frees them unsent, no reuse), pool.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-base $D/sc-pool $D/sc-x1 $D/sc-x2 $D/sc-x3 $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r8; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
T0=$(date +%s)
run() { # name binary only timeout
  local s=$(date +%s)
  if [ "$3" = all ]; then timeout $4 $W/$2 bench messages --json > $P/$1.json 2>>$P/err.txt
  else SC_BENCH_MESSAGES_ONLY=$3 timeout $4 $W/$2 bench messages --json > $P/$1.json 2>>$P/err.txt; fi
  echo "$1 $2 $3 rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
}
run 1-all-base sc-base all 150
run 2-all-pool sc-pool all 150
run 3-inproc-x3 sc-x3 inproc 60
run 4-inproc-x1 sc-x1 inproc 60
run 5-inproc-x2 sc-x2 inproc 60
run 6-inproc-pool sc-pool inproc 60
[ $(( $(date +%s)-T0 )) -lt 380 ] && run 7-all-pool sc-pool all 130
[ $(( $(date +%s)-T0 )) -lt 440 ] && run 8-inproc-base sc-base inproc 60
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r8.tgz r8 && rm -rf $P
