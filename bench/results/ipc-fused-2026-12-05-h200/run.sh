# run.sh - a round of the IPC collectives in one kernel when it is a few thread blocks
# (k_ipc_round, collectives/backend_ipc_dev.cu): does four ranks' decode TPOT on one GPU
# come under 2x one rank's (issue 20)? One H200; the call records its date in
# $OUT/gpu.txt. From the repository root on the GPU machine, binaries in .devrun/:
# sparsecp and test_gpu_ipc of the tree; .devrun/ipc2k/sparsecp: the tree before (a put
# and a combine kernel a round, e86fdd4); .devrun/gpufence/sparsecp: the tree with the
# header words' fences and acquire/release at GPU scope instead of system scope (an
# experiment, not in the tree).
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/ipc-fused-2026-12-05-h200/run.sh
#  PART=1: test_gpu_ipc under MPS (rounds of one kernel and, at 1 MB blocks, of two).
#  PART=2: default model decode TPOT (4 requests of 64 + 64 tokens, 500 ms apart): P4 N4
#          over ipc on the one GPU under MPS for each binary of BINS (default "ipc2k new
#          gpufence") in turn, and one rank (NCCL) of the tree, ROUNDS times (default 3).
#  PART=3: run --verify --collectives ipc at P4 N4 and P2 N2 (f32 rows) of the tree and
#          of gpufence (VERIFY_BINS: which).
#  PART=4: recovery over ipc (tests/gpu/recovery_gpu.sh with SC_RECOVERY_SHARED="--collectives
#          ipc": a killed node rejoins, a killed head restarts, a desync is run again, a
#          device fault of a rank under MPS; part 3 for the reference tokens; part 6: a
#          failed step rebuilds the IPC regions and runs again; REC_PARTS, REC_TIMEOUT).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
if has 1; then
  ipc_test_mps
  lap "test_gpu_ipc"
fi
if has 2; then
  p4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps on --clients 1 --json --requests $OUT/req4.jsonl --collectives ipc"
  for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
    for v in ${BINS:-ipc2k new gpufence}; do
      f="$OUT/p4-$v-$round"
      SPARSECP_LOG=info timeout 150 "$(bin_of sparsecp "$v")" run $p4 > "$f.json" 2> "$f.err"
      echo "P4 N4 ipc $v $round rc=$?"; show_run "$f.json"
    done
    tpot_alternating 1 new "$OUT/req4.jsonl"
    mv "$OUT/one-new-1.json" "$OUT/one-new-r$round.json"; mv "$OUT/one-new-1.err" "$OUT/one-new-r$round.err"
  done
  lap tpot
fi
if has 3; then
  for v in ${VERIFY_BINS:-new gpufence}; do
    for pd in "4" "2"; do
      timeout 150 "$(bin_of sparsecp "$v")" run --device cuda --pcp $pd --dcp $pd --collectives ipc --mps on --verify > "$OUT/verify-$v-p$pd.log" 2>&1
      echo "verify $v P$pd N$pd ipc rc=$? $(grep -E 'verify' "$OUT/verify-$v-p$pd.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
    done
  done
  lap verify
fi
if has 4; then
  SC_RECOVERY_SHARED="--collectives ipc" SC_RECOVERY_PARTS="${REC_PARTS:-1 2 3 5 6}" timeout "${REC_TIMEOUT:-300}" tests/gpu/recovery_gpu.sh > "$OUT/recovery.log" 2>&1
  echo "recovery_gpu over ipc rc=$?"; grep -E "^==|rc=|tokens|generation|again|FAIL|fail" "$OUT/recovery.log" | cut -c1-200 | head -40
  lap recovery
fi
cd "$OUT" && tar czf all.tgz *.txt *.json *.jsonl *.err *.log *.out 2>/dev/null; rm -f *.log *.json *.err *.jsonl *.out
