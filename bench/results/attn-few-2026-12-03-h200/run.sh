#!/bin/bash
# Issue 18/19: the few-heads attention kernel (kernels/cuda/cuda_attn_few.cu) for models
# with at most 16 heads over bf16 rows. PART=1: test_gpu_kernels (all cases), memcheck of
# the attention cases, then bench kernels' sparse_attn cases with the binaries of the
# commit before (.devrun/old) and of this tree, alternating, twice each. PART=2: bench e2e
# --device cuda (old, new), run --verify with bf16 rows (model-long and the default model,
# P2 N2 sharing the GPU), test_gpu_graphs, and issue 19's FlashMLA anchor
# (bench/attn_anchor.sh) in PART=3, then the device's ops by name (bench/results/
# gpu-ops-2026-12-03-h200/run.sh, .devrun/ops/sparsecp built from wip/device-ops-log); PART=2 first runs ncu of the few-heads kernel on the prefill case. Outputs
# under $OUT. PART=4: the 8-warp variant and the register sort against 15892e4;
# PART=5: validation of the session's final tree, the gather and model-deep's TPOT against
# d831920 (before the gather and RoPE changes).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
t0=$SECONDS; lap() { echo "  [$1: $((SECONDS - t0)) s]"; t0=$SECONDS; }
attn() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if "sparse_attn" not in r["name"]: continue
    p = r["params"]
    print(" ", r["name"], p["tokens"], p["heads"], p["kv"], "tflops", r["tflops"], "us", r["time_us"])
PY
}
has() { [[ " ${PART:-1} " == *" $1 "* ]]; } # PART: a list, e.g. "1 3"
if has 1; then
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"; lap tests
  grep -E "FAIL|attn" "$OUT/test_kernels.log" | head -40
  SC_GPU_CASES=attention timeout 120 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1; echo "memcheck attention rc=$?"; lap memcheck
  grep -h "ERROR SUMMARY" "$OUT"/memcheck-*.log
  for i in 1 2; do for v in old new; do
    bin=.devrun/gpu_bench_kernels; [ $v = old ] && bin=.devrun/old/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 90 $bin --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "kernels $v $i rc=$?"; attn "$OUT/kernels-attn-$v-$i.json"
  done; done; lap kernels
fi
if has 2; then
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.prefill timeout 120 ncu --clock-control none -k regex:k_attn_few --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    .devrun/gpu_bench_kernels --json > "$OUT/ncu-few-prefill.txt" 2>&1; echo "ncu rc=$?"; lap ncu
  grep -E "Throughput|Hit Rate|Duration|Stall|Achieved|Warp Cycles|Bandwidth" "$OUT/ncu-few-prefill.txt" | head -30
  for v in new old; do
    bin=.devrun/sparsecp; [ $v = old ] && bin=.devrun/old/sparsecp
    timeout 170 $bin bench e2e --device cuda --json > "$OUT/bench-e2e-$v.json" 2> "$OUT/bench-e2e-$v.err"; echo "e2e $v rc=$?"; lap e2e-$v
    python3 - "$OUT/bench-e2e-$v.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("context", "kv") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
  done
  for m in examples/model-long.json ""; do
    f="$OUT/verify-bf16-$(basename "${m:-default}" .json).log"
    timeout 45 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify ${m:+--model $m} > "$f" 2>&1
    echo "verify bf16 ${m:-default} rc=$? $(tail -1 "$f")"; lap verify
  done
  timeout 60 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$?"; lap graphs
fi
if has 3; then
  timeout 250 bash bench/attn_anchor.sh run "$OUT/anchor" > "$OUT/anchor.log" 2>&1; echo "anchor rc=$?"; lap anchor
  tail -5 "$OUT/anchor.log"
  BIN=.devrun/ops/sparsecp OUT="$OUT/ops" bash bench/results/gpu-ops-2026-12-03-h200/run.sh; lap ops
fi
if has 4; then # the 8-warp kernel and the register bitonic sort (.devrun) against 15892e4 (.devrun/old)
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep FAIL "$OUT/test_kernels.log"; lap tests
  for cs in attention topk indexer; do
    SC_GPU_CASES=$cs timeout 100 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-$cs.log" 2>&1; echo "memcheck $cs rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$cs.log")"
  done; lap memcheck
  for i in 1 2; do for v in old new; do
    bin=.devrun/gpu_bench_kernels; [ $v = old ] && bin=.devrun/old/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 90 $bin --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "kernels $v $i rc=$?"; attn "$OUT/kernels-attn-$v-$i.json" | grep " 8 "
    SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 90 $bin --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"
    python3 - "$OUT/kernels-indexer-$v-$i.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if "indexer" in r["name"]: print(" ", r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "kv") if k in p}, "tflops", r["tflops"], "us", r["time_us"])
PY
  done; done; lap kernels
  timeout 170 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-new.json" 2> "$OUT/bench-e2e-new.err"; echo "e2e rc=$?"; lap e2e
  python3 - "$OUT/bench-e2e-new.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("context", "kv") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
  for kv in bf16 f32; do for m in examples/model-long.json ""; do
    f="$OUT/verify-$kv-$(basename "${m:-default}" .json).log"
    timeout 45 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $kv --verify ${m:+--model $m} > "$f" 2>&1
    echo "verify $kv ${m:-default} rc=$? $(tail -1 "$f")"
  done; done; lap verify
  timeout 250 bash bench/attn_anchor.sh run "$OUT/anchor" > "$OUT/anchor.log" 2>&1; echo "anchor rc=$?"; lap anchor
  tail -5 "$OUT/anchor.log"
fi
if has 5; then # validation of the session's tree (.devrun) and model-deep's TPOT against d831920 (.devrun/old: before the RoPE change)
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep FAIL "$OUT/test_kernels.log"
  SC_GPU_CASES=elementwise timeout 60 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-elementwise.log" 2>&1; echo "memcheck elementwise rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-elementwise.log")"
  timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
  timeout 60 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$?"; lap tests
  timeout 170 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"; lap e2e
  python3 - "$OUT/bench-e2e.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("context", "kv") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
  for l in "f32 examples/model-long.json" "bf16 examples/model-long.json" "f32 examples/model-small.json"; do set -- $l
    f="$OUT/verify-$1-$(basename $2 .json).log"
    timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $1 --verify --model $2 > "$f" 2>&1
    echo "verify $1 $2 rc=$? $(tail -1 "$f")"
  done; lap verify
  for i in 1 2; do for v in old new; do
    bin=.devrun/gpu_bench_kernels; [ $v = old ] && bin=.devrun/old/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.gather timeout 60 $bin --json > "$OUT/kernels-gather-$v-$i.json" 2> "$OUT/kernels-gather-$v-$i.err"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['results']; c=[r['median'] for r in d if r['name']=='kernel.copy'][0]; g=[r['median'] for r in d if r['name']=='kernel.gather'][0]; print(' ', sys.argv[2], 'gather', round(g,1), 'copy', round(c,1), 'ratio', round(g/c,3))" "$OUT/kernels-gather-$v-$i.json" "$v $i"
  done; done; lap gather
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 2500)) $i; done > "$OUT/req4-deep.jsonl"
  for v in new old; do
    bin=.devrun/sparsecp; [ $v = old ] && bin=.devrun/old/sparsecp
    SPARSECP_LOG=info timeout 150 $bin run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --model examples/model-deep.json --requests "$OUT/req4-deep.jsonl" --clients 1 --json > "$OUT/deep-$v.json" 2> "$OUT/deep-$v.err"
    echo "model-deep $v rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'))" "$OUT/deep-$v.json"
    lap deep-$v
  done
fi
cd "$OUT" && tar czf all.tgz $(ls | grep -v all.tgz)
