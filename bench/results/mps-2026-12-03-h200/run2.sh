# run2.sh - the cluster's own MPS daemon (run --mps, tools/mps_daemon.c), 2026-12-03, one
# H200. From the repository root on the GPU machine, binaries in .devrun/:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/mps-2026-12-03-h200/run2.sh
#  PART=1: P4 N4 default model with --mps off, auto, on (alternating, two rounds), P1 N1;
#          what processes remain after each.
#  PART=2: P4 N4 under MPS, profiled: where a step goes now.
#  PART=3: the launcher killed (SIGKILL) mid-run: does the daemon go with it?
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
left() { echo "  left: $(pgrep -fa 'nvidia-cuda-mps|sparsecp node' | cut -c1-80 | tr '\n' ';')"; }
one() { # label pcp extra...
  local l=$1 p=$2; shift 2
  timeout 150 .devrun/sparsecp run --device cuda --gpus 1 --pcp $p --dcp $p "$@" --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/$l.json" 2> "$OUT/$l.err"
  echo "  $l rc=$?"; show_run "$OUT/$l.json"; grep -i "mps" "$OUT/$l.err" | head -3 | cut -c1-300; left
}
if has 1; then
  for round in 1 2; do
    one off$round 4 --mps off; one auto$round 4; one on$round 4 --mps on; one p1n1-$round 1
  done
  lap modes
fi
if has 2; then
  SPARSECP_LOG=info one prof 4 --profile
  grep -E "rank 0: step (100|101|102):" "$OUT/prof.err" | cut -c1-700
  grep -E "rank 0 collectives|rank 0: [0-9]+ steps, each" "$OUT/prof.err" | cut -c1-400
  lap prof
fi
if has 3; then
  .devrun/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --num-requests 40 > "$OUT/kill.log" 2>&1 &
  pid=$!; sleep 6; echo "  before kill: $(pgrep -fa 'nvidia-cuda-mps|sparsecp node' | wc -l) processes"
  kill -9 $pid; sleep 4; left
  pkill -9 -f 'nvidia-cuda-mps' ; sleep 1; left
  lap kill
fi
cd "$OUT" && tar czf all.tgz *.json *.err *.log 2>/dev/null && rm -f *.json *.err *.log *.jsonl
