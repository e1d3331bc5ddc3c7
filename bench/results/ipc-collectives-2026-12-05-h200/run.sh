# run.sh - the device collectives of ranks sharing one GPU (collectives/backend_ipc.h,
# issue 20's four-rank goal), one H200. Written 2026-12-04 before any GPU run (no device
# was lent that session); the call that runs it records its date in $OUT/gpu.txt.
# From the repository root on the GPU machine, binaries in .devrun/ (sparsecp,
# test_gpu_ipc, test_gpu_kernels, test_gpu_graphs):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/ipc-collectives-2026-12-05-h200/run.sh
#  PART=1: test_gpu_ipc under an MPS daemon of its own, then without MPS (slower: the
#          children's kernels take turns by time slice).
#  PART=2: run --verify with --collectives ipc --mps on: P2 N2 f32 and bf16 rows, P4 N4,
#          P2 N2 with --no-cuda-graphs.
#  PART=3: default model decode TPOT (4 requests of 64 + 64 tokens, 500 ms apart): P4 N4
#          on the one GPU under MPS with host collectives (staged), ipc (graphs, steps
#          overlapped), ipc one step at a time, ipc without graphs, ROUNDS times
#          (default 2) in turn, and one rank (NCCL) once a round.
#  PART=4: fault injections at P2 N2 over ipc: desync, devfault, kill on rank 1 at step 5
#          (each should end as docs/pipeline.md documents for NCCL).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
if has 1; then
  ipc_test_mps
  lap "test_gpu_ipc mps"
  timeout 200 .devrun/test_gpu_ipc > "$OUT/test_ipc_nomps.log" 2>&1; echo "test_gpu_ipc (no MPS) rc=$?"; head -20 "$OUT/test_ipc_nomps.log"
  lap "test_gpu_ipc no mps"
fi
if has 2; then
  verify_p2n2 --collectives ipc --mps on
  timeout 150 .devrun/sparsecp run --device cuda --pcp 4 --dcp 4 --collectives ipc --mps on --verify > "$OUT/verify-p4.log" 2>&1
  echo "verify P4 N4 ipc rc=$? $(grep -E 'verify' "$OUT/verify-p4.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  timeout 150 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --collectives ipc --mps on --no-cuda-graphs --verify > "$OUT/verify-nographs.log" 2>&1
  echo "verify P2 N2 ipc no graphs rc=$? $(grep -E 'verify' "$OUT/verify-nographs.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  lap verify
fi
if has 3; then
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl"
  for ((i = 1; i <= ${ROUNDS:-2}; i++)); do
    for v in "host" "ipc" "ipc --overlap off" "ipc --no-cuda-graphs"; do
      f="$OUT/p4-${v// /}-$i"
      SPARSECP_LOG=info timeout 150 .devrun/sparsecp run $p4 --collectives $v > "$f.json" 2> "$f.err"
      echo "P4 N4 $v $i rc=$?"; show_run "$f.json"
      grep -h "replayed (CUDA graphs)\|overlapped steps" "$f.err" | head -8
    done
    tpot_alternating 1 new "$OUT/req4.jsonl"
  done
  lap tpot
fi
if has 4; then
  for inj in desync:1:5 devfault:1:5 kill:1:5; do
    f="$OUT/inject-${inj%%:*}"
    timeout 150 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --collectives ipc --mps on --inject $inj > "$f.log" 2>&1
    echo "inject $inj rc=$?"; grep -E "desync|abort|rebuil|recover|fail|finished" "$f.log" | head -6
  done
  lap faults
fi
cd "$OUT" && tar czf all.tgz *.txt *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.log *.json *.err *.jsonl
