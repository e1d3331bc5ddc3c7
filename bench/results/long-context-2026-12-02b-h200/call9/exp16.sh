set -u
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
SC_GPU_CASES=indexer timeout 100 .devrun/exp/test16 > $OUT/test16.log 2>&1; echo "test16 indexer rc=$?"; grep -E "^ok|FAIL" $OUT/test16.log
for round in 1 2; do for v in w8 w16; do
  bin=.devrun/gpu_bench_kernels; [ $v = w16 ] && bin=.devrun/exp/bench16
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 100 $bin --json > $OUT/$v-$round.json 2>/dev/null
  python3 - $OUT/$v-$round.json $v <<'PY'
import json, sys
out = []
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if r["name"] == "kernel.indexer": out.append(f'{p["phase"][0]}{p["tokens"]}x{p["keys"]}h{p["index_heads"]}={r["median"]:.0f}')
print(sys.argv[2], " ".join(out))
PY
done; done
