#!/bin/bash
# session 6, call 2: tap batches paced (the io thread sends them every 1 ms and does not
# spin for them; a loop wakes it only past 2 MiB queued): sc-pace against sc-fin2
# (0289b8d), in process then ipc then tcp, alternating.
set -u
D=$PWD/.devrun-p; W=/tmp/p; mkdir -p $W; tar -C $W -xzf $D/p.tar.gz
cp $D/sc-fin2 $D/sc-pace $W/
export LD_LIBRARY_PATH=$W/lib
P=$OUT/r14; mkdir -p $P; (date; uptime; nproc) > $P/info.txt
T0=$(date +%s)
i=0
for tb in inproc:sc-pace inproc:sc-fin2 inproc:sc-pace inproc:sc-fin2 inproc:sc-pace inproc:sc-fin2 ipc:sc-pace ipc:sc-fin2 ipc:sc-pace ipc:sc-fin2 tcp:sc-pace tcp:sc-fin2; do
  t=${tb%%:*}; b=${tb##*:}
  i=$((i+1)); [ $(( $(date +%s)-T0 )) -lt 470 ] || break
  s=$(date +%s); SC_BENCH_MESSAGES_ONLY=$t timeout 70 $W/$b bench messages --json > $P/$i-$t-$b.json 2>>$P/err.txt
  echo "$i $t $b rc=$? $(( $(date +%s)-s ))s" >> $P/info.txt
done
uptime >> $P/info.txt
tar -C $OUT -czf $OUT/r14.tgz r14 && rm -rf $P
