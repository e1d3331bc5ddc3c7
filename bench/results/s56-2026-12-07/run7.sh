#!/bin/bash
# run7.sh (session 56): branch wip/readback on the GPU (build7.sh's .devrun/z, ~2.5 min).
# Between two decode steps the compute stream ran three copies and a memset (rank 0's
# tokens and margins, the notify's error flag and its reset) beside the next step's
# upload: the device's gap between steps, 22.8 us at one rank and 46-53 us at each rank
# of P4 N4 (session 55). z reads them by kernels. First its notify and deferred-read
# cases (test_gpu_kernels, SC_GPU_CASES=notify) and run --verify at P2 N2; then the
# default model's decode TPOT and device gaps (4 requests of 64 + 64 tokens 500 ms apart)
# at one rank over NCCL and at P4 N4 over ipc under MPS, SPARSECP_CUDA_READBACK=copy
# (main's copies) and the kernels alternating, three rounds. Merge only for a clear gain.
. bench/device_common.sh
SC_GPU_CASES=notify timeout 120 .devrun/z/test_gpu_kernels > "$OUT/z-notify.log" 2>&1
echo "z notify cases rc=$? $(grep -c '^ok' "$OUT/z-notify.log") ok"; grep -E "FAIL|not ok" "$OUT/z-notify.log" | head
BIN=.devrun/z verify_p2n2
requests 4 500 "$OUT/req4.jsonl"
for round in 1 2 3; do for mode in copy kernel; do
  f="$OUT/z-one-$mode-$round"
  SPARSECP_CUDA_READBACK=$mode SPARSECP_LOG=info timeout 60 .devrun/z/sparsecp run --device cuda --collectives nccl --gpus 1 \
    --pcp 1 --dcp 1 --clients 1 --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
  echo "one rank $mode $round rc=$?"; show_run "$f.json"
  grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-140
  f="$OUT/z-p4-$mode-$round"
  SPARSECP_CUDA_READBACK=$mode SPARSECP_LOG=info timeout 60 .devrun/z/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 \
    --mps on --clients 1 --collectives ipc --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
  echo "P4 N4 $mode $round rc=$?"; show_run "$f.json"
  grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-140 | head -4
done; done
lap readback
cd "$OUT" && tar czf readback.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
