# run.sh - overlapped steps on ranks sharing one GPU (issue 20, item 3) and the validation
# of the tree in .devrun, 2026-12-04, one H200. From the repository root on the GPU
# machine, binaries in .devrun/:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/overlap-ranks-2026-12-04-h200/run.sh
#  PART=1: test_gpu_kernels, test_gpu_graphs; run --verify at P2 N2 (f32 and bf16 rows)
#          with --overlap off and on, and at P4 N4 with --overlap on.
#  PART=2: decode TPOT of the default model (4 requests 500 ms apart): one rank (NCCL),
#          then P4 N4 under MPS with --overlap off and on, alternating, ROUNDS times
#          (default 2); the tokens of each run compared with the one rank's.
#  PART=3: recovery with --overlap on: tests/cli/recovery_cli.sh with --device cuda
#          (killed node and head, a node that keeps dying, a device fault, a desync), and
#          tests/gpu/recovery_gpu.sh parts 1 and 2 as they are (--overlap auto).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
run1="--device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json"
run4="--device cuda --gpus 1 --pcp 4 --dcp 4 --mps auto --clients 1 --json"
if has 1; then
  gpu_tests
  for ov in off on; do verify_p2n2 --overlap $ov; done
  timeout 200 .devrun/sparsecp run --device cuda --pcp 4 --dcp 4 --mps auto --verify --overlap on > "$OUT/verify4.log" 2>&1; echo "verify P4 N4 overlap on rc=$? $(grep -E 'verify' "$OUT/verify4.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  lap validation
fi
if has 2; then
  SPARSECP_LOG=info timeout 150 .devrun/sparsecp run $run1 --requests "$OUT/req4.jsonl" > "$OUT/one.json" 2> "$OUT/one.err"
  echo "one rank rc=$?"; show_run "$OUT/one.json"
  for ((i = 1; i <= ${ROUNDS:-2}; i++)); do for ov in off on; do
    f="$OUT/p4n4-$ov-$i"
    SPARSECP_LOG=info timeout 150 .devrun/sparsecp run $run4 --overlap $ov --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "P4 N4 overlap $ov $i rc=$?"; show_run "$f.json"
    python3 -c 'import json,sys
t = lambda f: [r.get("tokens") for r in json.load(open(f))["results"]]
a, b = t(sys.argv[1]), t(sys.argv[2]); print("  requests with the one rank tokens:", sum(x == y for x, y in zip(a, b)), "of", len(a))' "$OUT/one.json" "$f.json"
    grep -E "steps, each" "$f.err" | sed -E 's/.*(rank [0-9]+: )/  \1/' | cut -c1-230 | head -4
  done; done
  lap p4n4
fi
if has 3; then
  SC_LAUNCH_EXTRA="--device cuda --overlap on" timeout 300 tests/cli/recovery_cli.sh "$PWD/.devrun/sparsecp" "$PWD" > "$OUT/recovery_cli_overlap.log" 2>&1
  echo "recovery_cli --device cuda --overlap on rc=$?"; tail -3 "$OUT/recovery_cli_overlap.log"
  lap recovery-overlap
  SC_RECOVERY_PARTS="1 2" timeout 400 tests/gpu/recovery_gpu.sh > "$OUT/recovery_gpu.log" 2>&1
  echo "recovery_gpu parts 1 2 rc=$?"; tail -5 "$OUT/recovery_gpu.log"
  lap recovery
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.err *.jsonl
