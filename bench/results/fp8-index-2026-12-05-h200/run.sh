# run.sh - the indexer over fp8_index keys (e4m3 with a scale a key, as DeepSeek-V3.2
# keeps its index keys; issue 18 item 1), one H200. Written 2026-12-04 before any GPU run
# (no device was lent that session); the call that runs it records its date in
# $OUT/gpu.txt. From the repository root on the GPU machine, binaries in .devrun/
# (test_gpu_kernels, gpu_bench_kernels; .devrun/base/: the tree before, for a baseline):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2 3" bash bench/results/fp8-index-2026-12-05-h200/run.sh
#  PART=1: test_gpu_kernels' indexer cases (fp8_index against the CPU reference and its
#          layout invariance among them), then under compute-sanitizer memcheck.
#  PART=2: kernel.indexer of each binary of BINS (default "new"; "new base" with
#          .devrun/base/gpu_bench_kernels of main carried, to see that bf16 did not move),
#          alternating, twice: bf16 and fp8_index keys on the 64-head shapes (the base has
#          bf16 only; fp8_index keys there score e4m3 products, tc_w8, with q's heads
#          rounded), and the PyTorch indexer (bench/indexer_ref.py: bf16, and on the
#          64-head shapes fp8 with torch._scaled_mm) in the same call.
#  PART=3: the whole of test_gpu_kernels and test_gpu_graphs (the loader and the append
#          changed for every format; the fp8_index kv_write and widening gather are in
#          test_gpu_kernels' case_fp8_index_rows).
#  PART=4: the pipeline with fp8 index keys in the KV cache (--index-format fp8): run
#          --verify at P2 N2 on one GPU (f32 and bf16 KV rows), then bench e2e --device
#          cuda, whose third pass is bf16 rows with fp8 index keys ("index":"fp8").
. bench/device_common.sh
if has 1; then
  indexer_tests
  memcheck_indexer
  lap tests
fi
if has 2; then
  indexer_alternating "${BINS:-new}"
  timeout 200 python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2> "$OUT/torch-anchor.err"
  echo "torch rc=$?"; cut -c1-200 "$OUT/torch-anchor.jsonl"
  lap kernels
fi
if has 3; then
  gpu_tests
  lap validation
fi
if has 4; then
  verify_p2n2 --index-format fp8
  lap verify
  e2e_each new
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.jsonl *.err 2>/dev/null; rm -f *.log *.json *.jsonl *.err
