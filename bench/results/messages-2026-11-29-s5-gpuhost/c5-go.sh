#!/bin/bash
# session 5, call 5: a second ZeroMQ I/O thread for the tap XPUB (sc-io2) against sc-fin,
# ipc then tcp only, alternating.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-fin $D/sc-io2 $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r12; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
T0=$(date +%s)
i=0
for tb in ipc:sc-io2 ipc:sc-fin ipc:sc-io2 ipc:sc-fin tcp:sc-io2 tcp:sc-fin; do
  t=${tb%%:*}; b=${tb##*:}
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 170 ] || break
  s=$(date +%s); SC_BENCH_MESSAGES_ONLY=$t timeout 60 $W/$b bench messages --json > $P/$i-$t-$b.json 2>>$P/err.txt
  echo "$i $t $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r12.tgz r12 && rm -rf $P
