# device_common.sh - sourced by the bench/results/*/run.sh scripts that run on the GPU
# machine (from the repository root, binaries in .devrun/): the set-up every such call
# needs and printers for the JSON the benchmarks write. Sourcing it:
#  - makes $OUT (default /tmp/out), unpacks whatever travelled xz'd under .devrun (the
#    binaries keep their mode; a call that forgot to unpack them found none),
#    puts .devrun/lib and the machine's cuBLAS on LD_LIBRARY_PATH (tests/gpu/cuda_env.sh),
#    and writes the GPU, driver, clock and date to $OUT/gpu.txt;
#  - defines lap (elapsed seconds since the last lap) and has N (PART, a list such as
#    "1 3", names part N; default 1), and the steps several calls repeat (bin_of,
#    tpot_alternating, e2e_each, indexer_alternating, indexer_env, gpu_tests, verify_p2n2,
#    verify_long8k, verify_long8k_ipc, e2e_bf16_alternating, profile_long, rank_step_medians,
#    readback_ab, host_split_long,
#    other_gpu_tests, torch_indexer,
#    indexer_tests, kernel_tests_all, memcheck_indexer, ipc_test_mps, flashmla_anchor,
#    attn_pipeline_checks, deep_tpot_alternating, attention_cases, attn_sanitize,
#    attn_alternating, attn8_alternating, attn_env_alternating, ncu_src, ncu_attn,
#    gpu_peak_mem, verify_p4_ipc, deep_p4_ipc).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# (-f: a warm machine may keep a copy unpacked by the call before, beside which xz -d
# without it stopped: session 49's second call found binaries of the first still packed)
find .devrun -name '*.xz' -exec xz -T8 -d -f {} + 2> /dev/null
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
date -u >> "$OUT/gpu.txt"
t0=$SECONDS
lap() { echo "  [$1: $((SECONDS - t0)) s]"; t0=$SECONDS; }
has() { [[ " ${PART:-1} " == *" $1 "* ]]; }

# show_indexer FILE: the kernel.indexer results of a `bench kernels --json` file.
show_indexer() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if "indexer" in r["name"]: print(" ", r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "keys_fmt") if k in p}, "tflops", r["tflops"], "us", r["time_us"])
PY
}

# show_attn FILE [KV]: the sparse attention results at 8 heads (model-long's), over KV
# rows of format KV only when given.
show_attn() { python3 - "$1" "${2:-}" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if "sparse_attn" in r["name"] and p.get("heads") == 8 and sys.argv[2] in ("", p.get("kv")):
        print(" ", r["name"], p["tokens"], p["kv"], "tflops", r["tflops"], "us", r["time_us"])
PY
}

# show_attn128 FILE: the sparse attention results at 128 heads (FlashMLA's shapes).
show_attn128() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if "sparse_attn" in r["name"] and p.get("heads") == 128:
        print(" ", r["name"], p.get("tokens"), p.get("kv"), "tflops", r["tflops"], "us", r["time_us"])
PY
}

# flashmla_anchor: FlashMLA's sparse kernels on bench kernels' shapes (the wheel in
# .devrun/whl, bench/attn_anchor.sh prepare) -> $OUT/flashmla.jsonl, printed.
flashmla_anchor() {
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .devrun/whl/sgl_flash_mla-*.whl
  env -u LD_LIBRARY_PATH PYTHONPATH=/tmp/site timeout 200 python3 bench/attn_anchor.py flashmla > "$OUT/flashmla.jsonl" 2> "$OUT/flashmla.err"
  echo "flashmla rc=$?"; cut -c1-200 "$OUT/flashmla.jsonl"
}

# attn_pipeline_checks B: run --verify at P2 N2 on one GPU with bf16 rows over a 2-layer
# model of model-deep's shape (128 heads: the warpgroup attention kernels), then all of
# test_gpu_kernels and test_gpu_graphs, binaries in B.
attn_pipeline_checks() {
  sed 's/"layers": 61/"layers": 2/' examples/model-deep.json > "$OUT/m128.json"
  timeout 200 $1/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --model "$OUT/m128.json" --verify > "$OUT/verify-m128.log" 2>&1
  echo "verify P2 N2 bf16 m128 rc=$? $(grep -E 'verify' "$OUT/verify-m128.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  timeout 200 $1/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
  timeout 150 $1/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
}

# deep_tpot_alternating VAR B: model-deep's decode TPOT with bf16 rows, P1 N1, NCCL (4
# requests of 64 + 64 tokens, 2.5 s apart), environment variable VAR 0 and 1 in turn,
# twice, binaries in B: the comparison of two attention kernels in the pipeline.
deep_tpot_alternating() {
  local i v f
  requests 4 2500 "$OUT/req-deep.jsonl"
  for i in 1 2; do for v in 0 1; do
    f="$OUT/deep-$1$v-$i"
    env "$1=$v" SPARSECP_LOG=info timeout 100 $2/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 \
      --model examples/model-deep.json --kv-format bf16 --json --requests "$OUT/req-deep.jsonl" > "$f.json" 2> "$f.err"
    echo "model-deep bf16 $1=$v $i rc=$?"; show_run "$f.json"
  done; done
}

# show_e2e FILE: the cases of a `bench e2e --json` file with their medians.
show_e2e() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("pcp", "context", "kv", "index") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
}

# show_run FILE: a `run --json` file's error (None) and TPOT.
show_run() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'), 'generated', d.get('generated_tokens'))" "$1"
}

# requests N GAP_MS FILE: N requests of 64 prompt + 64 new tokens, GAP_MS apart.
requests() {
  local i
  for ((i = 0; i < $1; i++)); do
    printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * $2)) $i
  done > "$3"
}

# bin_of TOOL NAME: .devrun/TOOL for the tree in .devrun ("new"), else .devrun/NAME/TOOL.
bin_of() { if [ "$2" = new ]; then echo ".devrun/$1"; else echo ".devrun/$2/$1"; fi; }

# tpot_alternating ROUNDS BINS REQUESTS: the default model's decode TPOT at one rank
# (NCCL, GPU 0, one client) of each binary of BINS (see bin_of) in turn, ROUNDS times,
# results in $OUT/one-NAME-ROUND.json (.err: the run's info log).
tpot_alternating() {
  local i v
  for ((i = 1; i <= $1; i++)); do for v in $2; do
    SPARSECP_LOG=info timeout 100 "$(bin_of sparsecp "$v")" run --device cuda --collectives nccl \
      --gpus 1 --pcp 1 --dcp 1 --clients 1 --json --requests "$3" > "$OUT/one-$v-$i.json" 2> "$OUT/one-$v-$i.err"
    echo "one rank $v $i rc=$?"; show_run "$OUT/one-$v-$i.json"
  done; done
}

# e2e_each BINS: `bench e2e --device cuda` of each binary of BINS, in
# $OUT/bench-e2e-NAME.json (each within E2E_TIMEOUT s, default 450: three KV formats
# since the fp8 index keys' pass; E2E_ARGS="--kv-format f32", say, times one, ~1/3).
e2e_each() {
  local v
  for v in $1; do
    timeout "${E2E_TIMEOUT:-450}" "$(bin_of sparsecp "$v")" bench e2e --device cuda ${E2E_ARGS:-} --json > "$OUT/bench-e2e-$v.json" 2> "$OUT/bench-e2e-$v.err"
    echo "e2e $v rc=$?"; show_e2e "$OUT/bench-e2e-$v.json"
  done
}

# indexer_alternating BINS: kernel.indexer of each binary of BINS (see bin_of), in turn,
# twice, results in $OUT/kernels-indexer-NAME-ROUND.json.
indexer_alternating() {
  local i v
  for i in 1 2; do for v in $1; do
    SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 "$(bin_of gpu_bench_kernels "$v")" --json > "$OUT/kernels-indexer-$v-$i.json" 2> "$OUT/kernels-indexer-$v-$i.err"
    echo "indexer $v $i rc=$?"; show_indexer "$OUT/kernels-indexer-$v-$i.json"
  done; done
}

# gpu_tests: test_gpu_kernels and test_gpu_graphs of .devrun, logs in $OUT.
gpu_tests() {
  timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
  timeout 150 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
}

# The steps below run the binaries in $BIN (default .devrun: a call of one build), or in
# a folder of several builds' (BIN=.devrun/next verify_p2n2).

# verify_p2n2 [OPTION...]: run --verify of $BIN at P2 N2 on the GPU with f32 and then
# bf16 rows, with the options given.
verify_p2n2() {
  local fmt
  for fmt in "" "--kv-format bf16"; do
    timeout 150 ${BIN:-.devrun}/sparsecp run --device cuda --pcp 2 --dcp 2 --verify "$@" $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $* $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
}

# req_long8k: two 8k prompts of 16 new tokens each, 10 ms apart, in $OUT/req8k.jsonl.
req_long8k() {
  local i
  for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
}

# verify_long8k: run --verify at P2 N2 over bf16 rows with model-long and req_long8k's
# prompts (the cache sized for them), binaries in BIN (default .devrun): decode steps
# over thousands of keys, whose indexer selects over many blocks.
verify_long8k() {
  req_long8k
  timeout 150 ${BIN:-.devrun}/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1024 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
  echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
}

# verify_long8k_ipc: verify_long8k's requests (req_long8k writes them where no run wrote
# them before) at P2 N2 over ipc under an MPS server of the cluster's own (four
# processes' kernels beside one another), binaries in BIN (default .devrun).
verify_long8k_ipc() {
  [ -s "$OUT/req8k.jsonl" ] || req_long8k
  timeout 150 ${BIN:-.devrun}/sparsecp run --device cuda --pcp 2 --dcp 2 --mps on --collectives ipc \
    --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 \
    --max-model-len 8320 --num-blocks 1024 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long-ipc.log" 2>&1
  echo "verify P2 N2 ipc MPS model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long-ipc.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
}

# e2e_bf16_alternating ROUNDS SIDES: `bench e2e --device cuda --kv-format bf16` of
# .devrun/SIDE/sparsecp for each side of SIDES in turn, ROUNDS times, in
# $OUT/e2e-SIDEROUND.json, their TTFT and TPOT printed.
e2e_bf16_alternating() {
  local r side
  for ((r = 1; r <= $1; r++)); do for side in $2; do
    timeout 100 .devrun/$side/sparsecp bench e2e --device cuda --kv-format bf16 --json \
      > "$OUT/e2e-$side$r.json" 2> "$OUT/e2e-$side$r.err"
    echo "e2e $side $r rc=$?"; show_e2e "$OUT/e2e-$side$r.json" | grep -E "tpot |ttft"
  done; done
}

# profile_long BIN CONTEXT: `run --profile` of model-long over bf16 rows at P1 N1, one
# request of a CONTEXT-token prompt and 192 new tokens, SPARSECP_LOG=info, with BIN's
# sparsecp, in $OUT/prof-CONTEXT.log: its last profiled steps and CUPTI's costliest ops
# printed.
profile_long() {
  local flags=${3---profile} log="$OUT/prof-$2${3+-np}.log"
  printf '{"prompt_len": %d, "max_tokens": 192, "seed": 7}\n' "$2" > "$OUT/req-$2.jsonl"
  SPARSECP_LOG=info timeout 150 "$1/sparsecp" run --device cuda --pcp 1 --dcp 1 $flags \
    --model examples/model-long.json --kv-format bf16 --token-budget 131072 \
    --max-model-len 131392 --num-blocks 8400 --requests "$OUT/req-$2.jsonl" > "$log" 2>&1
  echo "profile $2 ${flags:-(unprofiled)} rc=$?"
  grep -E "rank 0: step" "$log" | tail -3 | sed 's/^.*rank 0/rank 0/' | cut -c1-380
  grep -E "cuda: +[0-9]" "$log" | head -12 | sed 's/^.*cuda:/cuda:/' | cut -c1-150
}

# rank_step_medians LOG: per rank, the median over its profiled steps 20-250 (`run
# --profile`, SPARSECP_LOG=info: the executor's step lines with CUPTI's busy time) of the
# step's wall time, each stage and the device's busy time, kernel span, ops and idle time.
rank_step_medians() { python3 - "$1" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r'rank (\d+): step (\d+): (.*)', line)
    if not m or 'busy' not in line: continue
    r, step = int(m.group(1)), int(m.group(2))
    if not 20 <= step <= 250: continue
    body = m.group(3)
    b = re.search(r'busy ([0-9.]+) ms of a ([0-9.]+) ms kernel span .*?(\d+) kernels.*idle ([0-9.]+)', body)
    try:  # (the ranks write one stderr: a line cut into by another is skipped)
        vals = {'wall': float(body.split(' ms')[0])}
        for k, v in re.findall(r'([a-z_]+) (-?[0-9.]+)', body.split('):', 1)[1].split(';')[0]):
            vals[k] = float(v)
        vals.update(busy=float(b.group(1)), span=float(b.group(2)), ops=float(b.group(3)), idle=float(b.group(4)))
    except (ValueError, IndexError, AttributeError):
        continue
    rows.setdefault(r, []).append(vals)
for r in sorted(rows):
    keys = rows[r][0].keys()
    print('  rank', r, len(rows[r]), 'steps, medians:', ' '.join('%s %.3f' % (k, statistics.median(v[k] for v in rows[r] if k in v)) for k in keys))
PY
}

# readback_ab ROUNDS LAYOUTS: .devrun/z's default-model decode TPOT and device gaps
# (requests in $OUT/req4.jsonl) with SPARSECP_CUDA_READBACK=copy and =kernel in turn,
# ROUNDS times, at each of LAYOUTS: "one" (one rank over NCCL), "p4" (P4 N4 over ipc
# under MPS). Session 56's wip/readback (results/s56-2026-12-07/run7.sh, run8.sh).
readback_ab() {
  local rounds=$1 lays=$2 round mode lay f args label
  for ((round = 1; round <= rounds; round++)); do for mode in copy kernel; do for lay in $lays; do
    f="$OUT/z-$lay-$mode-$round"
    if [ "$lay" = one ]; then
      args=(--collectives nccl --pcp 1 --dcp 1); label="one rank"
    else
      args=(--pcp 4 --dcp 4 --mps on --collectives ipc); label="P4 N4"
    fi
    SPARSECP_CUDA_READBACK=$mode SPARSECP_LOG=info timeout 60 .devrun/z/sparsecp run --device cuda --gpus 1 \
      "${args[@]}" --clients 1 --json --requests "$OUT/req4.jsonl" > "$f.json" 2> "$f.err"
    echo "$label $mode $round rc=$?"; show_run "$f.json"
    grep -h "the device went" "$f.err" | sed 's/^.*executor: //' | cut -c1-140 | head -4
  done; done; done
}

# host_split_long BIN CONTEXT: profile_long's run unprofiled (no CUPTI tracing the host's
# CUDA calls), to prof-CONTEXT-np.log: the executor's summary at shutdown, the host's
# time to queue a step and its prepare's split (index uploads, key list) over the run.
host_split_long() {
  profile_long "$1" "$2" ""
  grep -E "of the host's on average|queued while the step before" "$OUT/prof-$2-np.log" | sed 's/^.*rank 0/rank 0/' | cut -c1-330
}

# ipc_test_mps [BIN]: test_gpu_ipc (BIN, default .devrun/test_gpu_ipc) under an MPS daemon
# of its own (log in $OUT).
ipc_test_mps() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/sc-ipc-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/sc-ipc-mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d; echo "mps start rc=$?"
  timeout 200 ${1:-.devrun/test_gpu_ipc} > "$OUT/test_ipc_mps.log" 2>&1; echo "test_gpu_ipc (MPS) rc=$?"; head -20 "$OUT/test_ipc_mps.log"
  echo quit | nvidia-cuda-mps-control; sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

# other_gpu_tests [BIN]: test_gpu_graphs, test_gpu_nccl and test_gpu_ipc (under MPS) of
# BIN (default .devrun), the GPU tests besides test_gpu_kernels; logs in $OUT.
other_gpu_tests() {
  local b=${1:-.devrun}
  timeout 100 $b/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  timeout 100 $b/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$? $(tail -1 "$OUT/test_nccl.log")"
  ipc_test_mps $b/test_gpu_ipc | tail -3
}

# torch_indexer: PyTorch's indexer + top-K on the 64-head shapes (bench/indexer_ref.py
# --only h64) -> $OUT/torch-anchor.jsonl, the cases printed.
torch_indexer() {
  timeout 150 /opt/torch/.venv/bin/python3 bench/indexer_ref.py --only h64 > "$OUT/torch-anchor.jsonl" 2>&1
  echo "PyTorch anchor rc=$?"; grep -E '"H": 64' "$OUT/torch-anchor.jsonl" | cut -c1-120
}

# indexer_tests: test_gpu_kernels' indexer cases only (of $BIN); kernel_tests_all: all of
# it; memcheck_indexer: the indexer cases under compute-sanitizer's memcheck (at most MC_T
# seconds, default 300). Logs in $OUT.
indexer_tests() {
  SC_GPU_CASES=indexer timeout 200 ${BIN:-.devrun}/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1; echo "test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer.log" | cut -c1-200 | head -30
}
kernel_tests_all() { # (all of test_gpu_kernels of $BIN, within 300 s)
  timeout 300 ${BIN:-.devrun}/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head -30
}
memcheck_indexer() {
  SC_GPU_CASES=indexer timeout ${MC_T:-300} compute-sanitizer --tool memcheck ${BIN:-.devrun}/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1; echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log")"
}

# indexer_env V TAG [VAR=VALUE...]: kernel.indexer of .devrun/V with the environment
# given (a knob's two sides in one binary), to $OUT/idx-TAG.json, printed.
indexer_env() {
  local v=$1 tag=$2; shift 2
  env "$@" SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/idx-$tag.json" 2> /dev/null
  echo "indexer $tag rc=$?"; show_indexer "$OUT/idx-$tag.json"
}

# attention_cases V...: the attention cases of test_gpu_kernels of each .devrun/V.
attention_cases() {
  local v
  for v in "$@"; do
    SC_GPU_CASES=attention timeout 60 .devrun/$v/test_gpu_kernels > "$OUT/test_attention_$v.log" 2>&1
    echo "$v attention rc=$? $(grep -c '^ok' "$OUT/test_attention_$v.log") ok"
    grep -E "FAIL|not ok" "$OUT/test_attention_$v.log" | cut -c1-200 | head -5
  done
}

# attn_sanitize TOOL V: compute-sanitizer's TOOL over .devrun/V's attention cases
# (racecheck: the roles' cases, the kernel of warpgroups in roles alone; memcheck: all),
# its log in $OUT and its summary printed. An environment prefix reaches the binary
# (SPARSECP_ATTN_WS4=1 attn_sanitize racecheck ws4).
attn_sanitize() {
  local cases=attention t=100 log="$OUT/$1-$2.log"
  [ "$1" = racecheck ] && cases=attention_roles t=150
  SC_GPU_CASES=$cases timeout $t compute-sanitizer --tool "$1" .devrun/$2/test_gpu_kernels > "$log" 2>&1
  echo "$1 $cases $2 rc=$? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' "$log" | head -1)"
}

# attn_alternating V...: kernel.sparse_attn of each .devrun/V in turn, twice (the 128-head
# cases printed).
attn_alternating() {
  local i v
  for i in 1 2; do for v in "$@"; do
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/kernels-attn-$v-$i.json" 2> "$OUT/kernels-attn-$v-$i.err"
    echo "attn $v $i rc=$?"; show_attn128 "$OUT/kernels-attn-$v-$i.json" | grep -v "decode 256"
  done; done
}

# attn8_alternating ROUNDS V...: kernel.sparse_attn of each .devrun/V in turn, ROUNDS
# times, the 8-head cases over bf16 rows printed (model-long's: the few-heads kernel).
attn8_alternating() {
  local i v n=$1; shift
  for ((i = 1; i <= n; i++)); do for v in "$@"; do
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/attn8-$v-$i.json" 2> "$OUT/attn8-$v-$i.err"
    echo "attn8 $v $i rc=$?"; show_attn "$OUT/attn8-$v-$i.json" bf16
  done; done
}

# attn_env_alternating VAR "VALUES" V [PATTERN]: kernel.sparse_attn of .devrun/V with the
# environment variable VAR at each of VALUES in turn, twice (the 128-head cases printed,
# those matching PATTERN where given): two sides of a comparison in one binary.
attn_env_alternating() {
  local i x f
  for i in 1 2; do for x in $2; do
    f="$OUT/kernels-attn-$1-$x-$i"
    env "$1=$x" SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$3/gpu_bench_kernels --json > "$f.json" 2> "$f.err"
    echo "attn $1=$x $i rc=$?"; show_attn128 "$f.json" | grep -e "${4:-}"
  done; done
}

# ncu_src NAME V MANGLED: ncu with source counters of one launch (the third; with
# NCU_SKIP=N, the (N+1)-th) of the kernel whose mangled name matches MANGLED (ncu's
# demangled names read k_attn_ws<(bool)1, (bool)1>) in .devrun/V's gpu_bench_kernels,
# its cases chosen by the caller's
# environment (SC_BENCH_KERNELS_ONLY, ...); the source page gzipped (and its top lines
# printed by bench/ncu_lines.py, and its top instructions with --sass: build V with
# -lineinfo), the details kept.
ncu_src() {
  timeout 150 ncu --clock-control none --set full --import-source yes \
    --kernel-name-base mangled -k "regex:$3" --launch-skip "${NCU_SKIP:-2}" --launch-count 1 \
    -o "$OUT/ncu-$1" .devrun/$2/gpu_bench_kernels --json > "$OUT/ncu-$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  ncu -i "$OUT/ncu-$1.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-src-$1.csv" 2>&1
  ncu -i "$OUT/ncu-$1.ncu-rep" --page details > "$OUT/ncu-det-$1.txt" 2>&1
  grep -E "Duration|Eligible Warps|Warp Cycles Per Issued|Issued Warp|L2 Hit|Mem Busy|Max Bandwidth|DRAM Throughput" "$OUT/ncu-det-$1.txt" | head -10 | cut -c1-120
  gzip -f "$OUT/ncu-src-$1.csv"; rm -f "$OUT/ncu-$1.ncu-rep"
  python3 bench/ncu_lines.py "$OUT/ncu-src-$1.csv.gz" 12 | cut -c1-160
  python3 bench/ncu_lines.py --sass "$OUT/ncu-src-$1.csv.gz" 6 | cut -c1-160
}
# ncu_attn NAME V CASE MANGLED: ncu_src of kernel.sparse_attn.CASE.
ncu_attn() { SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.$3 ncu_src "$1" "$2" "$4"; }

# gpu_peak_mem CMD...: runs CMD while sampling the GPU's memory every 0.2 s; prints its
# exit status and the most memory used (MiB).
gpu_peak_mem() {
  local f="$OUT/mem.$$"; : > "$f"
  ( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> "$f"; sleep 0.2; done ) &
  local s=$!; "$@"; local rc=$?; kill $s; wait $s 2> /dev/null
  echo "  rc=$rc, most memory used $(sort -n "$f" | tail -1) MiB"; rm -f "$f"
}

# deep_p4_ipc B TIMEOUT: model-deep (bf16 rows) at P4 N4 over ipc under MPS, binaries in
# .devrun/B, 4 requests of 64 + 16 tokens 500 ms apart, with the GPU's most memory used
# and the ranks' lines about their weights; $OUT/deep-B.json / .err.
deep_p4_ipc() {
  printf '{"prompt_len": 64, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' 0 0 500 1 1000 2 1500 3 > "$OUT/req-deep.jsonl"
  echo "model-deep P4 N4 ipc, $1:"
  gpu_peak_mem env SPARSECP_LOG=info timeout $2 .devrun/$1/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 \
    --mps on --collectives ipc --model examples/model-deep.json --kv-format bf16 --clients 1 --json \
    --requests "$OUT/req-deep.jsonl" > "$OUT/deep-$1.json" 2> "$OUT/deep-$1.err"
  show_run "$OUT/deep-$1.json"
  grep -hE "one copy|first rank|builds its own|error|cannot" "$OUT/deep-$1.err" | cut -c1-200 | head -6
}

# verify_p4_ipc B [VAR=VALUE...]: run --verify of the default model at P4 N4 over ipc under
# MPS, binaries in .devrun/B, with the environment given; the verdict and the ranks'
# lines about their weights (info log), $OUT/verify-B.log.
verify_p4_ipc() {
  local b=$1; shift
  env "$@" SPARSECP_LOG=info timeout 150 .devrun/$b/sparsecp run --device cuda --gpus 1 --pcp 4 --dcp 4 \
    --mps on --collectives ipc --verify > "$OUT/verify-$b.log" 2>&1
  echo "verify P4 N4 ipc ($b $*) rc=$? $(grep -E 'verify' "$OUT/verify-$b.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  grep -hE "one copy|of its GPU's first rank|builds its own|cannot share" "$OUT/verify-$b.log" | cut -c1-160 | sort | uniq -c | head
}
