#!/bin/bash
# run.sh - main's state for issues 18 and 19 in one call (binaries: build.sh; with carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh): kernel.sparse_attn
# twice and FlashMLA (issue 19's ratios), kernel.indexer twice and PyTorch's indexer +
# top-K on the same shapes (bench/indexer_ref.py; issue 18's), then bench e2e --device
# cuda over bf16 and over f32 rows (TTFT, TPOT ratios). ~4 minutes.
. bench/device_common.sh
attn_alternating main
flashmla_anchor
lap attention
indexer_alternating main
timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-220 "$OUT/torch-anchor.jsonl" | head -12
lap indexer
for f in bf16 f32; do
  timeout 150 .devrun/main/sparsecp bench e2e --device cuda --kv-format $f --json > "$OUT/bench-e2e-$f.json" 2> "$OUT/bench-e2e-$f.err"
  echo "e2e $f rc=$?"; show_e2e "$OUT/bench-e2e-$f.json"
done
lap e2e
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
