#!/bin/bash
# session 5, call 2: where the cross-process rate goes (sc-pool, ipc, untapped): perf
# (cpu-clock) per thread and symbol
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-pool $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r9; mkdir -p $P; (date; uptime) > $P/info.txt
s=$(date +%s)
SC_BENCH_MESSAGES_TAP=off SC_BENCH_MESSAGES_ONLY=ipc timeout 150 $W/perf record -e cpu-clock -F 2999 -o /tmp/perf.data $W/sc-pool bench messages --json > $P/perf-ipc.json 2>>$P/err.txt
echo "perf rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
$W/perf report -i /tmp/perf.data --stdio --sort pid,comm 2>/dev/null | grep -v "^$" | head -40 > $P/comm.txt
for c in sc1-io sc1-loop1 sc0-loop0 sc0-io sc1-loop0; do
  $W/perf report -i /tmp/perf.data --stdio --comm $c --sort sym 2>/dev/null | grep -v "^$" | head -45 > $P/sym-$c.txt
done
$W/perf report -i /tmp/perf.data --stdio --sort comm,dso 2>/dev/null | grep -v "^$" | head -60 > $P/dso.txt
s=$(date +%s)
SC_BENCH_MESSAGES_TAP=off SC_BENCH_MESSAGES_ONLY=ipc SC_BENCH_MESSAGES_SPIN_US=0 timeout 100 $W/sc-pool bench messages --json > $P/ipc-spin0.json 2>>$P/err.txt
echo "spin0 rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
tar -C $OUT -czf $OUT/r9.tgz r9 && rm -rf $P
