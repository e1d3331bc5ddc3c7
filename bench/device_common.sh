# device_common.sh - sourced by the bench/results/*/run.sh scripts that run on the GPU
# machine (from the repository root, binaries in .devrun/): the set-up every such call
# needs and printers for the JSON the benchmarks write. Sourcing it:
#  - makes $OUT (default /tmp/out), unpacks the carried OpenBLAS if it travelled xz'd,
#    puts .devrun/lib and the machine's cuBLAS on LD_LIBRARY_PATH (tests/gpu/cuda_env.sh),
#    and writes the GPU, driver, clock and date to $OUT/gpu.txt;
#  - defines lap (elapsed seconds since the last lap) and has N (PART, a list such as
#    "1 3", names part N; default 1).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
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

# show_e2e FILE: the cases of a `bench e2e --json` file with their medians.
show_e2e() { python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(" ", r["name"], {k: p[k] for k in ("pcp", "context", "kv") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
}

# show_run FILE: a `run --json` file's error (None) and TPOT.
show_run() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'), 'generated', d.get('generated_tokens'))" "$1"
}

# requests N GAP_MS FILE: N requests of 64 prompt + 64 new tokens, GAP_MS apart.
requests() {
  for ((i = 0; i < $1; i++)); do
    printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * $2)) $i
  done > "$3"
}
