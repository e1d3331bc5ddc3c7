#!/bin/bash
# Issue 18, the prefill indexer (2026-12-03, afternoon). PART=1: test_gpu_kernels (all
# cases, with the two fp8 few-heads cases of e97b2fd never run before), then the split
# kernel's tile skip (wip/split-skip: .devrun against .devrun/old = 54d1f38) on model-deep's
# TPOT, the default model's unprofiled host times, then ncu (full set, source counters; .devrun/li is built with -lineinfo) of the
# indexer's scoring and final top-K on model-long's 32k prompt (4 heads x 64, f32 keys).
# Outputs under $OUT (all.tgz).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
t0=$SECONDS; lap() { echo "  [$1: $((SECONDS - t0)) s]"; t0=$SECONDS; }
has() { [[ " ${PART:-1} " == *" $1 "* ]]; }
idx() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if "indexer" in r["name"]: print(" ", r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "keys_fmt") if k in p}, "tflops", r["tflops"], "us", r["time_us"])
PY
}
attn_cmp() { # the attention cases at 8 heads over bf16 rows: .devrun ("cur") and $2 ("$1"), alternating, twice
  for i in 1 2; do for v in cur $1; do
    bin=.devrun/gpu_bench_kernels; [ $v = $1 ] && bin=$2/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 90 $bin --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; python3 - "$OUT/kernels-attn-$v-$i.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if p.get("heads") == 8 and p.get("kv") == "bf16": print(" ", r["name"], p["tokens"], "tflops", r["tflops"], "us", r["time_us"])
PY
  done; done; lap attn
}
if has 1; then
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|fp8" "$OUT/test_kernels.log" | head; lap tests
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 2500)) $i; done > "$OUT/req4-deep.jsonl"
  for v in new old; do
    bin=.devrun/sparsecp; [ $v = old ] && bin=.devrun/old/sparsecp
    SPARSECP_LOG=info timeout 100 $bin run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --model examples/model-deep.json --requests "$OUT/req4-deep.jsonl" --clients 1 --json > "$OUT/deep-$v.json" 2> "$OUT/deep-$v.err"
    echo "model-deep $v rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'), 'tokens', [len(r.get('tokens', [])) for r in d.get('requests', [])][:4])" "$OUT/deep-$v.json"
  done
  # the default model unprofiled: the executor's host times (queue, gap) at info level
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 500)) $i; done > "$OUT/req4.jsonl"
  SPARSECP_LOG=info timeout 60 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/default.json" 2> "$OUT/default.err"
  echo "default rc=$?"; grep -E "steps, each|tpot" "$OUT/default.err" | head -4
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'))" "$OUT/default.json"
  lap deep
  # a 32k prompt's step over bf16 rows, by stage (profiled; step 2, after run's warm-up)
  printf '{"prompt_len": 32768, "max_tokens": 4}\n' > "$OUT/req32k.jsonl"
  SPARSECP_LOG=info timeout 120 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --profile \
    --model examples/model-long.json --kv-format bf16 --requests "$OUT/req32k.jsonl" --token-budget 32768 --num-blocks 2176 \
    --max-model-len 32864 --deadline-ms 120000 > "$OUT/profile-32k-bf16.log" 2>&1; echo "profile rc=$?"
  grep "executor: rank 0: step 2:" "$OUT/profile-32k-bf16.log" | cut -c1-600
  # the few-heads kernel with a ring of five 32-row slots (.devrun/v2) against two 64-row stages
  attn_cmp v2 .devrun/v2
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 120 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"; echo "kernels rc=$?"; idx "$OUT/kernels-indexer.json"; lap kernels
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=32768 timeout 200 ncu --clock-control none --set full --import-source yes \
    -k regex:'k_idx_tc|k_topk_final' --launch-count 2 -o "$OUT/idx32k" .devrun/li/gpu_bench_kernels --json > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"; lap ncu
  ncu -i "$OUT/idx32k.ncu-rep" --page details > "$OUT/ncu-details.txt" 2>&1
  grep -E "k_idx_tc|k_topk_final|Duration|Throughput|Issued|Stall|Warp Cycles|Registers|Achieved Occ|Theoretical Occ" "$OUT/ncu-details.txt" | head -60
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source sass -k regex:k_idx_tc > "$OUT/ncu-src-idx.csv" 2>&1; echo "src rc=$? $(wc -l < "$OUT/ncu-src-idx.csv") lines"
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source cuda,sass -k regex:k_topk_final > "$OUT/ncu-src-final.csv" 2>&1; echo "src2 rc=$? $(wc -l < "$OUT/ncu-src-final.csv") lines"
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source cuda -k regex:k_idx_tc > "$OUT/ncu-cuda-idx.csv" 2>&1; echo "src3 rc=$? $(wc -l < "$OUT/ncu-cuda-idx.csv") lines"; lap export
 SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.prefill timeout 120 ncu --clock-control none -k regex:k_attn_few --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section SchedulerStats \
    .devrun/gpu_bench_kernels --json > "$OUT/ncu-few-prefill.txt" 2>&1; echo "ncu few rc=$?"; lap ncu-few
  grep -E "Throughput|Hit Rate|Duration|Stall|Warp Cycles|Bandwidth|Eligible|Issued" "$OUT/ncu-few-prefill.txt" | head -24
fi
if has 2; then # the prefill indexer's fold with shifts, 32-bit list maxima, the final top-K without a select for one list (.devrun) against aa3e79f (.devrun/li); .devrun/p4: room 4K beyond K
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep FAIL "$OUT/test_kernels.log"; lap tests
  for cs in indexer topk; do
    SC_GPU_CASES=$cs timeout 100 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-$cs.log" 2>&1; echo "memcheck $cs rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$cs.log")"
  done; lap memcheck
  for i in 1 2; do for v in old new p4; do
    bin=.devrun/gpu_bench_kernels; [ $v = old ] && bin=.devrun/li/gpu_bench_kernels; [ $v = p4 ] && bin=.devrun/p4/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 120 $bin --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"; echo "indexer $v $i rc=$?"; idx "$OUT/kernels-indexer-$v-$i.json"
  done; done; lap kernels
  # the few-heads attention with one 64-row stage and two blocks an SM (.devrun/s1) against two stages and one block
  attn_cmp s1 .devrun/s1
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 500)) $i; done > "$OUT/req4.jsonl"
  SPARSECP_LOG=info timeout 60 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/default.json" 2> "$OUT/default.err"
  echo "default rc=$?"; grep -E "steps, each|between" "$OUT/default.err" | cut -c1-300
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'))" "$OUT/default.json"
  timeout 200 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"; lap e2e
  python3 - "$OUT/bench-e2e.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("context", "kv") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
fi
if has 3; then # validation of the session's tree: room 4K, the few-heads kernel's stages by kind of token
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep FAIL "$OUT/test_kernels.log"
  timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
  timeout 60 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$?"; lap tests
  for cs in attention indexer; do
    SC_GPU_CASES=$cs timeout 100 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-$cs.log" 2>&1; echo "memcheck $cs rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$cs.log")"
  done; lap memcheck
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 120 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"; echo "indexer rc=$?"; idx "$OUT/kernels-indexer.json"
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 90 .devrun/gpu_bench_kernels --json > "$OUT/kernels-attn.json" 2> "$OUT/kernels-attn.err"; echo "attn rc=$?"
  python3 - "$OUT/kernels-attn.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if p.get("heads") == 8: print(" ", r["name"], p["tokens"], p["kv"], "tflops", r["tflops"], "us", r["time_us"])
PY
  lap kernels
  timeout 200 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"; echo "e2e rc=$?"; lap e2e
  python3 - "$OUT/bench-e2e.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("context", "kv") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
  for l in "f32 examples/model-long.json" "bf16 examples/model-long.json" "bf16 -"; do set -- $l
    n=default m=""; [ "$2" != - ] && n=$(basename $2 .json) m="--model $2"; f="$OUT/verify-$1-$n.log"
    timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $1 --verify $m > "$f" 2>&1
    echo "verify $1 $2 rc=$? $(tail -1 "$f")"
  done; lap verify
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 500)) $i; done > "$OUT/req4.jsonl"
  SPARSECP_LOG=info timeout 60 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/default.json" 2> "$OUT/default.err"
  echo "default rc=$?"; grep -E "between" "$OUT/default.err" | cut -c1-300
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'))" "$OUT/default.json"
fi
if has 4; then # for the next step: room K + 6K (.devrun/p6) against K + 4K, and ncu of the final tree's prefill indexer (.devrun/li, -lineinfo)
  for i in 1 2; do for v in cur p6; do
    bin=.devrun/gpu_bench_kernels; [ $v = p6 ] && bin=.devrun/p6/gpu_bench_kernels
    SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=32768 timeout 120 $bin --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"; echo "indexer $v $i rc=$?"; idx "$OUT/kernels-indexer-$v-$i.json"
  done; done; lap kernels
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=32768 timeout 200 ncu --clock-control none --set full --import-source yes \
    -k regex:'k_idx_tc|k_topk_final' --launch-count 2 -o "$OUT/idx32k" .devrun/li/gpu_bench_kernels --json > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
  ncu -i "$OUT/idx32k.ncu-rep" --page details > "$OUT/ncu-details.txt" 2>&1
  grep -E "k_idx_tc|k_topk_final|Duration|Issued Warp|Warp Cycles Per Issued" "$OUT/ncu-details.txt" | head -20
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source sass -k regex:k_idx_tc > "$OUT/ncu-src-idx.csv" 2>&1
  ncu -i "$OUT/idx32k.ncu-rep" --page source --csv --print-source cuda,sass -k regex:k_topk_final > "$OUT/ncu-src-final.csv" 2>&1
  gzip "$OUT"/ncu-src-*.csv; lap ncu
fi
if has 5; then # after the review: a top-K merge at K = 8000 (a round takes one list), the few-heads kernel's stages by decode, the executor's log line
  timeout 150 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|merge" "$OUT/test_kernels.log" | head -5
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 500)) $i; done > "$OUT/req4.jsonl"
  SPARSECP_LOG=info timeout 60 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --requests "$OUT/req4.jsonl" --clients 1 --json > "$OUT/default.json" 2> "$OUT/default.err"
  echo "default rc=$?"; grep -E "between" "$OUT/default.err" | cut -c1-300
  timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json > "$OUT/verify-bf16-model-long.log" 2>&1; echo "verify rc=$? $(tail -1 "$OUT/verify-bf16-model-long.log")"
fi
cd "$OUT" && tar czf all.tgz --exclude=all.tgz --exclude="*.ncu-rep" * && ls -la
