# run.sh - ranks sharing one GPU: with and without an MPS server (2026-12-03, one H200).
# From the repository root on the GPU machine, binaries in .devrun/ (sparsecp of the
# commit named in bench/gpu-step.md; ctx_share built from tests/gpu/ctx_share.cu):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/mps-2026-12-03-h200/run.sh
#  PART=1: ctx_share's lock-step pattern, 1 and 4 processes, no MPS; the default
#          model P1 N1 and P4 N4 (host collectives, staged), no MPS.
#  PART=2: the same under an MPS control daemon this script starts with its own pipe and
#          log folders (and stops at the end), and run --verify at P2 N2 and P4 N4.
. bench/device_common.sh
echo "mps control: $(command -v nvidia-cuda-mps-control || echo none)"
nvidia-smi --query-gpu=compute_mode --format=csv,noheader
requests 4 500 "$OUT/req4.jsonl"

share() { # label: ctx_share at 1 and 4 processes, 1 and 10 kernels between syncs
  for k in 1 10; do for p in 1 4; do
    echo "  $1 ctx_share procs $p kernels $k: $(timeout 60 .devrun/ctx_share $p 2000 $k)"
  done; done
}
models() { # label
  for pc in "1 1" "4 4"; do set -- $1 $pc
    timeout 150 .devrun/sparsecp run --device cuda --gpus 1 --pcp $2 --dcp $3 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/$1-p$2n$3.json" 2> "$OUT/$1-p$2n$3.err"
    echo "  $1 P$2 N$3 rc=$?"; show_run "$OUT/$1-p$2n$3.json"
  done
}

if has 1; then
  share nomps; models nomps; lap nomps
fi
if has 2; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/sc-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/sc-mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d; echo "mps start rc=$?"
  share mps; models mps
  for pc in "2 2" "4 4"; do set -- $pc
    f="$OUT/mps-verify-p$1n$2.err"
    timeout 200 .devrun/sparsecp run --device cuda --gpus 1 --pcp $1 --dcp $2 --verify > "$f" 2>&1
    echo "  mps verify P$1 N$2 rc=$? $(grep -E 'verify|result' "$f" | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
  done
  echo quit | nvidia-cuda-mps-control; sleep 1
  tail -5 $CUDA_MPS_LOG_DIRECTORY/control.log | cut -c1-200
  lap mps
fi
cd "$OUT" && tar czf all.tgz *.json *.err 2>/dev/null && rm -f *.json *.err *.jsonl
