# run.sh - sparse attention with warpgroups in roles (k_attn_ws, branch wip/attn-ws:
# bf16 rows, first run in call 1; since then valid rows from the selection, empty tiles
# skipped and fp8_ds_mla rows, not yet run) beside k_attn_wg (SPARSECP_ATTN_WS=0) and
# FlashMLA, one H200; the call records its date in $OUT/gpu.txt. From the repository
# root on the GPU machine, binaries of the branch in .devrun/attnws/ (test_gpu_kernels,
# gpu_bench_kernels), the sgl-flash-mla wheel in .devrun/whl (bench/attn_anchor.sh prepare):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/attn-ws-2026-12-05-h200/run.sh
#  PART=1: test_gpu_kernels' attention cases (against the CPU reference; a token batched
#          and alone bit for bit), the new kernel by default.
#  PART=2: kernel.sparse_attn of "wg" (SPARSECP_ATTN_WS=0) and "ws", alternating, twice
#          (bf16 and fp8_ds_mla rows).
#  PART=3: FlashMLA's sparse kernels on the same shapes (bench/attn_anchor.py flashmla).
#  PART=4: compute-sanitizer memcheck, then racecheck, of the attention cases.
#  PART=5: the pipeline: run --verify at P2 N2 on one GPU with bf16 rows over a 2-layer
#          model of model-deep's shape (128 heads: the new kernel), then all of
#          test_gpu_kernels and test_gpu_graphs (.devrun/attnws/).
#  PART=6: model-deep decode TPOT, bf16 rows, P1 N1, NCCL (4 requests of 64 + 64 tokens,
#          2.5 s apart), SPARSECP_ATTN_WS=0 and 1 in turn, twice.
#  PART=7: ncu of one k_attn_ws launch of the bf16 decode case (128 x 1 query): speed of
#          light, warp states, scheduler.
. bench/device_common.sh
B=.devrun/attnws
if has 1; then
  SC_GPU_CASES=attention timeout 200 $B/test_gpu_kernels > "$OUT/test_attention.log" 2>&1
  echo "ws test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attention.log") ok"; grep -E "FAIL|not ok|attn" "$OUT/test_attention.log" | cut -c1-220 | head -20
  lap tests
fi
if has 2; then
  for i in 1 2; do for v in wg ws; do
    ws=1; [ $v = wg ] && ws=0
    SPARSECP_ATTN_WS=$ws SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 150 $B/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json"
  done; done
  lap kernels
fi
if has 3; then
  flashmla_anchor
  lap flashmla
fi
if has 4; then
  for tool in memcheck racecheck; do
    SC_GPU_CASES=attention timeout 200 compute-sanitizer --tool $tool $B/test_gpu_kernels > "$OUT/$tool-attention.log" 2>&1
    echo "$tool attention rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/$tool-attention.log" | head -2)"
  done
  lap sanitizer
fi
if has 5; then
  attn_pipeline_checks $B
  lap pipeline
fi
if has 6; then
  deep_tpot_alternating SPARSECP_ATTN_WS $B
  lap deep
fi
if has 7; then
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.decode timeout 120 ncu --clock-control none -k regex:k_attn_ws --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    $B/gpu_bench_kernels --json > "$OUT/ncu-ws-decode.txt" 2>&1; echo "ncu rc=$?"
  grep -E "Duration|Throughput|Eligible|Active Warps|Warp Cycles|Stall|Registers" "$OUT/ncu-ws-decode.txt" | head -24
  lap ncu
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.jsonl *.err
