# run.sh - sparse attention over bf16 rows with warpgroups in roles (k_attn_ws, branch
# wip/attn-ws, written without a GPU) beside k_attn_wg (SPARSECP_ATTN_WS=0) and
# FlashMLA, one H200; the call records its date in $OUT/gpu.txt. From the repository
# root on the GPU machine, binaries of the branch in .devrun/attnws/ (test_gpu_kernels,
# gpu_bench_kernels), the sgl-flash-mla wheel in .devrun/whl (bench/attn_anchor.sh prepare):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/attn-ws-2026-12-05-h200/run.sh
#  PART=1: test_gpu_kernels' attention cases (against the CPU reference; a token batched
#          and alone bit for bit), the new kernel by default.
#  PART=2: kernel.sparse_attn of "wg" (SPARSECP_ATTN_WS=0) and "ws", alternating, twice.
#  PART=3: FlashMLA's sparse kernels on the same shapes (bench/attn_anchor.py flashmla).
#  PART=4: compute-sanitizer memcheck, then racecheck, of the attention cases.
. bench/device_common.sh
B=.devrun/attnws
attn128() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if "sparse_attn" in r["name"] and p.get("heads") == 128:
        print(" ", r["name"], p.get("tokens"), p.get("kv"), "tflops", r["tflops"], "us", r["time_us"])
PY
}
if has 1; then
  SC_GPU_CASES=attention timeout 200 $B/test_gpu_kernels > "$OUT/test_attention.log" 2>&1
  echo "ws test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attention.log") ok"; grep -E "FAIL|not ok|attn" "$OUT/test_attention.log" | cut -c1-220 | head -20
  lap tests
fi
if has 2; then
  for i in 1 2; do for v in wg ws; do
    ws=1; [ $v = wg ] && ws=0
    SPARSECP_ATTN_WS=$ws SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 150 $B/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; attn128 "$OUT/kernels-attn-$v-$i.json"
  done; done
  lap kernels
fi
if has 3; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .devrun/whl/sgl_flash_mla-*.whl
  env -u LD_LIBRARY_PATH PYTHONPATH=/tmp/site timeout 200 python3 bench/attn_anchor.py flashmla > "$OUT/flashmla.jsonl" 2> "$OUT/flashmla.err"
  echo "flashmla rc=$?"; cut -c1-200 "$OUT/flashmla.jsonl"
  lap flashmla
fi
if has 4; then
  for tool in memcheck racecheck; do
    SC_GPU_CASES=attention timeout 200 compute-sanitizer --tool $tool $B/test_gpu_kernels > "$OUT/$tool-attention.log" 2>&1
    echo "$tool attention rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/$tool-attention.log" | head -2)"
  done
  lap sanitizer
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.jsonl *.err
