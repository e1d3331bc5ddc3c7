# run4.sh - after a review of the MPS change (one restart per GPU's failure, --mps off
# gives the nodes an empty pipe folder, the daemon stopped with quit/SIGTERM/SIGKILL),
# 2026-12-03, one H200:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/mps-2026-12-03-h200/run4.sh
# tests/gpu/recovery_gpu.sh parts 1, 2 and 5; P4 N4 with --mps off and auto (one round);
# what processes remain.
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
left() { echo "  left: $(pgrep -fa 'nvidia-cuda-mps|sparsecp node' | cut -c1-90 | tr '\n' ';')"; }
( export OUT=$OUT/rec; mkdir -p $OUT; SC_RECOVERY_PARTS="1 2 5" timeout 200 bash tests/gpu/recovery_gpu.sh 2>&1 | grep -vE '^\{"request_id' | tail -20; echo "recovery rc=${PIPESTATUS[0]}" )
left; lap recovery
for mode in off auto; do
  timeout 60 .devrun/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --mps $mode --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/p4-$mode.json" 2> "$OUT/p4-$mode.err"
  echo "  P4 N4 --mps $mode rc=$?"; show_run "$OUT/p4-$mode.json"; grep -i mps "$OUT/p4-$mode.err" | head -2 | cut -c1-200
done
left; lap p4
cd "$OUT" && tar czf all.tgz rec *.json *.err 2>/dev/null; rm -rf rec *.json *.err *.jsonl
