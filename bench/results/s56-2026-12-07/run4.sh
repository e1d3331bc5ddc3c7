#!/bin/bash
# run4.sh - where four ranks' decode step goes now (session 56; session 37's
# four-ranks-2026-12-06/run2.sh on today's main): the default model's decode (4 requests
# of 64 + 64 tokens 500 ms apart) once each with --profile (every rank logs each step's
# stages and, from CUPTI, its kernels' busy time and span; a profiled run does not
# overlap its steps), P4 N4 over ipc under MPS and one rank (NCCL), binaries of
# ../s55-2026-12-07/build3.sh's m (main 1998cf4), carry [".devrun"] (~1 min).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
SPARSECP_LOG=info timeout 90 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json \
  --requests "$OUT/req4.jsonl" --collectives ipc --profile > "$OUT/p4-prof.json" 2> "$OUT/p4-prof.err"
echo "P4 N4 ipc profiled rc=$?"; show_run "$OUT/p4-prof.json"
SPARSECP_LOG=info timeout 90 .devrun/m/sparsecp run --device cuda --gpus 1 --pcp 1 --dcp 1 --clients 1 --json \
  --requests "$OUT/req4.jsonl" --collectives nccl --profile > "$OUT/one-prof.json" 2> "$OUT/one-prof.err"
echo "one rank profiled rc=$?"; show_run "$OUT/one-prof.json"
for f in p4-prof one-prof; do
  echo "== $f: rank 0's 200th step"; grep "rank 0: step" "$OUT/$f.err" | sed -n 200p | cut -c1-700
  python3 - "$OUT/$f.err" <<'PY'
import re, statistics, sys
# per rank, the median over its steps 20-250 of each number of the step lines
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r'rank (\d+): step (\d+): (.*)', line)
    if not m or 'busy' not in line: continue
    r, step = int(m.group(1)), int(m.group(2))
    if not 20 <= step <= 250: continue
    body = m.group(3)
    vals = {'wall': float(body.split(' ms')[0])}
    for k, v in re.findall(r'([a-z_]+) (-?[0-9.]+)', body.split('):', 1)[1].split(';')[0]):
        vals[k] = float(v)
    b = re.search(r'busy ([0-9.]+) ms of a ([0-9.]+) ms kernel span .*?(\d+) kernels.*idle ([0-9.]+)', body)
    vals.update(busy=float(b.group(1)), span=float(b.group(2)), ops=float(b.group(3)), idle=float(b.group(4)))
    rows.setdefault(r, []).append(vals)
for r in sorted(rows):
    keys = rows[r][0].keys()
    print('  rank', r, len(rows[r]), 'steps, medians:', ' '.join('%s %.3f' % (k, statistics.median(v[k] for v in rows[r] if k in v)) for k in keys))
PY
done
cd "$OUT" && tar czf prof.tgz *.json *.jsonl *.err 2>/dev/null; rm -f *.json *.err *.jsonl
