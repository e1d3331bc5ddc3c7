# run3.sh - recovery with ranks sharing the GPU now that they run under the cluster's
# MPS daemon, and the daemon's end when run is killed (2026-12-03, one H200):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/mps-2026-12-03-h200/run3.sh
#  PART=1: tests/gpu/recovery_gpu.sh (its parts 1-2: recovery_cli.sh --device cuda: kills,
#          restarts, a device fault, a desync; ranks sharing the GPU, so under MPS).
#  PART=2: run (P4 N4, a long run) killed with SIGKILL: the daemon and its server go?
. bench/device_common.sh
left() { echo "  left: $(pgrep -fa 'nvidia-cuda-mps|sparsecp node' | cut -c1-90 | tr '\n' ';')"; }
if has 1; then
  ( export OUT=$OUT/rec; mkdir -p $OUT; timeout 400 bash tests/gpu/recovery_gpu.sh 2>&1 | head -40 )
  grep -iE "mps|device cannot|fault" $OUT/rec/recovery_cli.log | head -20 | cut -c1-300
  left; lap recovery
fi
if has 2; then
  .devrun/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 --num-requests 4000 > "$OUT/kill.log" 2>&1 &
  pid=$!; sleep 8; echo "  before kill: $(pgrep -fa 'nvidia-cuda-mps|sparsecp node' | cut -c1-60 | tr '\n' ';')"
  kill -9 $pid; sleep 5; left
  pkill -9 -f 'nvidia-cuda-mps'; pkill -9 -f 'sparsecp node'; sleep 1; left
  lap kill
fi
cd "$OUT" && tar czf all.tgz rec *.log 2>/dev/null; rm -rf rec *.log
