#!/bin/bash
# run2.sh - session 41's second call (~4 minutes): the TF32 experiment on kvfp8
# (SPARSECP_GEMM_TF32=1: bench e2e bf16 twice, run --verify P2 N2 f32 and bf16), then
# issue 18's state on kvfp8: bench e2e over every layout (f32, bf16, bf16 + fp8 keys,
# fp8_ds_mla), kernel.indexer and PyTorch's indexer + top-K in the same call.
. bench/device_common.sh
F=.devrun/kvfp8
for r in 1 2; do
  SPARSECP_GEMM_TF32=1 timeout 100 $F/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-tf32-$r.json" 2> "$OUT/e2e-tf32-$r.err"
  echo "e2e bf16 TF32 $r rc=$?"; show_e2e "$OUT/e2e-tf32-$r.json" | grep -v "launched\|one_at"
done
for fmt in f32 bf16; do
  SPARSECP_GEMM_TF32=1 timeout 100 $F/sparsecp run --device cuda --pcp 2 --dcp 2 --verify --kv-format $fmt > "$OUT/verify-tf32-$fmt.log" 2>&1
  echo "verify TF32 P2 N2 $fmt rc=$? $(grep -E 'verify|error' "$OUT/verify-tf32-$fmt.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
lap tf32
timeout 200 $F/sparsecp bench e2e --device cuda --json > "$OUT/e2e-all.json" 2> "$OUT/e2e-all.err"
echo "e2e every layout rc=$?"; show_e2e "$OUT/e2e-all.json" | grep -v "launched\|one_at"
lap e2e-all
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 100 $F/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"
echo "indexer rc=$?"; show_indexer "$OUT/kernels-indexer.json"
timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-200 "$OUT/torch-anchor.jsonl" | head -12
lap indexer
cd "$OUT" && tar czf all2.tgz *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err *.jsonl
