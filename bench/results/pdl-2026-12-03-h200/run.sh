# run.sh - programmatic dependent launch (kernels/cuda/cuda_common.cuh), 2026-12-03, one
# H200. From the repository root on the GPU machine, binaries in .devrun/:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/pdl-2026-12-03-h200/run.sh
#  PART=1: test_gpu_kernels and test_gpu_graphs with PDL on (the default).
#  PART=2: decode TPOT with SPARSECP_CUDA_PDL=0 / 1 alternating, twice (default model 4
#          requests 500 ms apart, model-small, model-deep once), P1 N1 over one-rank NCCL as
#          in bench/gpu-step.md, the tokens compared; run --verify at P2 N2.
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
if has 1; then
  timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
  timeout 150 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  lap tests
fi
tpot() { # NAME MODEL_ARGS ROUNDS
  for ((i = 1; i <= $3; i++)); do for pdl in 0 1; do
    f="$OUT/$1-pdl$pdl-$i"
    SPARSECP_CUDA_PDL=$pdl SPARSECP_LOG=info timeout 120 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $2 --requests "$OUT/req4.jsonl" --clients 1 --json > "$f.json" 2> "$f.err"
    echo "$1 pdl $pdl $i rc=$?"; show_run "$f.json"; grep -E "overlapped steps" "$f.err" | cut -c1-200
  done; done
  python3 - "$OUT/$1" <<'PY'
import json, sys
t = {p: [r.get("tokens") for r in json.load(open(f"{sys.argv[1]}-pdl{p}-1.json"))["results"]] for p in (0, 1)}
print("  tokens identical with and without PDL:", t[0] == t[1], sum(len(x or []) for x in t[1]), "tokens")
PY
  lap $1
}
if has 2; then
  tpot default "" 2
  tpot small "--model examples/model-small.json" 2
  tpot deep "--model examples/model-deep.json" 1
  f="$OUT/verify.log"
  timeout 120 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify > "$f" 2>&1; echo "verify P2 N2 rc=$? $(grep -E 'verify|result' "$f" | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
  lap verify
fi
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err *.jsonl
