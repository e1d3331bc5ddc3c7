#!/bin/bash
# attn_anchor.sh - sparsecp's attention and gather kernels beside FlashMLA, in one run on
# the GPU machine (issue 19; bench/kernels-cuda.md).
#
#   bench/attn_anchor.sh prepare      on the build machine: the sgl-flash-mla 1.0.0 wheel
#                                     (abi3, FlashMLA's SM90 kernels) into .devrun/whl;
#                                     tests/gpu/stage.sh has put gpu_bench_kernels there
#   bench/attn_anchor.sh run [OUT]    on the GPU machine (`run` with carry [".devrun"]):
#                                     bench kernels' attention, gather and copy cases, then
#                                     FlashMLA's, then one document with the ratios:
#                                     OUT/kernels-anchored.json (default OUT: $OUT)
#
# The FlashMLA part runs with the machine's own libraries (its PyTorch), not the carried
# ones: LD_LIBRARY_PATH is unset for it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."  # (.devrun and tests/gpu are the repository's)
case "${1:-}" in
prepare)
  mkdir -p .devrun/whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d .devrun/whl sgl-flash-mla==1.0.0
  ls -l .devrun/whl
  ;;
run)
  out=${2:-${OUT:?give OUT}}
  mkdir -p "$out"
  [ -x .devrun/gpu_bench_kernels ] || { echo "no .devrun/gpu_bench_kernels (tests/gpu/stage.sh)" >&2; exit 2; }
  ls .devrun/whl/sgl_flash_mla-*.whl > /dev/null || { echo "no wheel: $0 prepare" >&2; exit 2; }
  # the carried libraries for sparsecp's binary; cuBLAS from the machine (cuda_env.sh)
  ( . tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
    for only in sparse_attn gather; do
      SC_BENCH_KERNELS_ONLY=$only timeout 300 .devrun/gpu_bench_kernels --json
    done ) > "$out/kernels.jsonl" 2> "$out/kernels.err"
  # two documents, one per filter (each with the copy ceiling): one list of results
  python3 - "$out/kernels.jsonl" > "$out/kernels.json" <<'PY'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
seen, merged = set(), dict(docs[0], results=[])
for d in docs:
    for r in d["results"]:
        key = json.dumps([r["name"], r["params"]], sort_keys=True)
        if key not in seen:
            seen.add(key)
            merged["results"].append(r)
json.dump(merged, sys.stdout)
PY
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .devrun/whl/sgl_flash_mla-*.whl
  env -u LD_LIBRARY_PATH PYTHONPATH=/tmp/site timeout 300 python3 "$here/attn_anchor.py" flashmla \
    > "$out/flashmla.jsonl" 2> "$out/flashmla.err" || echo "(a FlashMLA case failed: $out/flashmla.err)" >&2
  python3 "$here/attn_anchor.py" merge "$out/kernels.json" "$out/flashmla.jsonl" > "$out/kernels-anchored.json"
  ;;
*)
  sed -n '2,14p' "$0" >&2
  exit 2
  ;;
esac
