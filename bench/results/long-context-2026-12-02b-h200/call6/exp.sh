set -u
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
for round in 1 2; do for v in A B C D; do
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 100 .devrun/exp/bench_$v --json > $OUT/$v-$round.json 2>/dev/null
  python3 - $OUT/$v-$round.json $v <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
out = []
for r in rs:
    p = r["params"]
    if r["name"] != "kernel.indexer": continue
    fl = 2 * p["index_heads"] * p["index_dim"] * (p["keys"] if p["phase"] == "decode" else 0)
    out.append(f'{p["phase"][0]}{p["tokens"]}x{p["keys"]}h{p["index_heads"]}={r["median"]:.0f}GF')
print(sys.argv[2], " ".join(out))
PY
done; done
