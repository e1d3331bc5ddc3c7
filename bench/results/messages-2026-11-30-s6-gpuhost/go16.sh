#!/bin/bash
# session 6, call 5: a profile of the in-process tap (0289b8d built -O3 -g
# -fno-omit-frame-pointer, sc-g): tapped runs only, then untapped only.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-g $W/sc
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r16; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
for tap in on off; do
  s=$(date +%s)
  SC_BENCH_MESSAGES_TAP=$tap SC_BENCH_MESSAGES_ONLY=inproc timeout 100 $W/perf record -e cpu-clock -F 2999 -g -o /tmp/perf-$tap.data $W/sc bench messages --json > $P/perf-$tap.json 2>>$P/err.txt
  echo "perf $tap rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
  $W/perf report -i /tmp/perf-$tap.data --stdio --no-children --sort comm 2>/dev/null | grep -v "^$" | grep "%" | head -20 > $P/perf-$tap-comm.txt
  for th in sc0-loop0 sc0-loop1 sc0-io; do
    $W/perf report -i /tmp/perf-$tap.data --stdio --no-children --comm $th --sort dso,sym -g none 2>/dev/null | grep "%" | head -40 > $P/perf-$tap-sym-$th.txt
    $W/perf report -i /tmp/perf-$tap.data --stdio --no-children --comm $th --sort srcline -g none 2>/dev/null | grep "%" | head -80 > $P/perf-$tap-src-$th.txt
  done
  $W/perf annotate -i /tmp/perf-$tap.data --stdio --comm sc0-loop1 -s run_slot 2>/dev/null | head -600 > $P/perf-$tap-ann-runslot.txt
  cp /tmp/perf-$tap.data $P/ 
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r16.tgz r16 && rm -rf $P; ls -la $OUT
