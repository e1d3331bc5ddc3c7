#!/bin/bash
# session 4, call 1: the interleaved tap measurement of the current build and of a
# 4096-letter tap queue, and CPU profiles (bundled perf, cpu-clock) of tapped and untapped
# in-process runs.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc $D/sc-q4k $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r; mkdir -p $P; (uptime; nproc; git log --oneline -1) > $P/info.txt
$W/perf record -e cpu-clock -F 999 -o /tmp/t.data -- true > $P/perfcheck.txt 2>&1; echo "perf rc=$?" >> $P/perfcheck.txt
for b in sc sc-q4k; do s=$(date +%s); SC_BENCH_MESSAGES_ONLY=inproc timeout 150 $W/$b bench messages --json > $P/inproc-$b.json 2>>$P/err.txt; echo "$b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt; done
for tap in off on; do
  s=$(date +%s)
  SC_BENCH_MESSAGES_TAP=$tap SC_BENCH_MESSAGES_ONLY=inproc timeout 150 $W/perf record -e cpu-clock -F 2999 -o /tmp/perf-$tap.data $W/sc bench messages --json > $P/perf-$tap.json 2>>$P/err.txt
  echo "perf $tap rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
  $W/perf report -i /tmp/perf-$tap.data --stdio --sort comm 2>/dev/null | grep -v "^$" | head -30 > $P/perf-$tap-comm.txt
  $W/perf report -i /tmp/perf-$tap.data --stdio --sort comm,dso,sym 2>/dev/null | grep -v "^$" | head -200 > $P/perf-$tap-sym.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r.tgz r && rm -rf $P
