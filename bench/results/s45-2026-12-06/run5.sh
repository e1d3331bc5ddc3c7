#!/bin/bash
# run5.sh (session 45; build2.sh of session 44 then build5.sh stage it): .devrun/s2 = main
# 22617eb (session 44's merge: cut atomics + sampled floors for 64 heads + their cases),
# .devrun/new = main 3e62768 (before session 44), .devrun/dpos = s2 + dense-pos.patch,
# .devrun/unif = s2 + unif.patch. Parts, in order of what matters most:
#  1. s2's test_gpu_kernels (all cases, the three 64-head floors cases new) and
#     test_gpu_graphs;
#  2. kernel.indexer of s2, unif and dpos alternating twice; s2 with floors at S = 128
#     and with groups of 4 tokens once; the indexer cases of unif and dpos; PyTorch's
#     indexer (bench/indexer_ref.py) for the ratios;
#  3. the SASS of the 64-head bf16 scorers (k_idx_tc<128, bf16, VEC, WG>, k_idx_dense<bf16>)
#     in s2 and unif: R2UR, HGMMA and all instructions counted;
#  4. run --verify P2 N2 of s2: the default model over f32 and bf16 rows, model-long with
#     two 8k prompts (the cache sized for them);
#  5. bench e2e over bf16 rows, new then s2;
#  6. compute-sanitizer memcheck of s2's and unif's indexer cases;
#  7. ncu: each kernel of model-long's one decode token over 128k keys (s2).
# Ran on one H100: PART "1 2 3 4 5" from 20:31 UTC -> out/c1 (the 580-second limit cut
# PART 5's second e2e, and the files came back but for a count limit: only c.out holds
# them all), PART "6 7" with that e2e at 20:44 -> out/c2.
. bench/device_common.sh
B=.devrun/s2
idx() { # V TAG [ENV...]: kernel.indexer of .devrun/V, the results printed
  local v=$1 tag=$2; shift 2
  env "$@" SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/idx-$tag.json" 2> /dev/null
  echo "indexer $tag rc=$?"; show_indexer "$OUT/idx-$tag.json"
}
if has 1; then
  timeout 200 $B/test_gpu_kernels > "$OUT/test-kernels.log" 2>&1
  echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test-kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test-kernels.log" | cut -c1-200 | head -5
  grep -h "heads=64 dim=128 topk=256 tokens=1100" "$OUT/test-kernels.log" | cut -c1-200
  timeout 100 $B/test_gpu_graphs > "$OUT/test-graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test-graphs.log")"
  lap tests
fi
if has 2; then
  for i in 1 2; do for v in s2 unif dpos; do idx $v $v-$i; done; done
  idx s2 s2-floors128 SPARSECP_INDEXER_FLOORS=128
  idx s2 s2-g4 SPARSECP_INDEXER_GROUP=4
  for v in unif dpos; do
    SC_GPU_CASES=indexer timeout 150 .devrun/$v/test_gpu_kernels > "$OUT/test-$v.log" 2>&1
    echo "$v indexer cases rc=$? $(grep -c '^ok' "$OUT/test-$v.log") ok"; grep -E "FAIL|not ok" "$OUT/test-$v.log" | head -5
  done
  timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1
  echo "PyTorch anchor rc=$?"; grep -E '"H": 64' "$OUT/torch-anchor.jsonl" | cut -c1-200
  lap indexer
fi
if has 3; then
  CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
  for v in s2 unif; do
    "$CUOBJ" -sass .devrun/$v/gpu_bench_kernels 2>/dev/null | awk '
      /Function :/ { keep = ($0 ~ /k_idx_tcILi128ELi[0-9]ELb1ELb1E|k_idx_denseILb0E/) }
      keep' > "$OUT/sass-$v.txt"
    awk -v v=$v '/Function :/ { if (f) print v, f, n, r, h, m; f = $3; n = r = h = m = 0; next }
      /\/\*[0-9a-f]+\*\// { n++; if ($0 ~ /R2UR/) r++; if ($0 ~ /HGMMA/) h++; if ($0 ~ / MOV /) m++ }
      END { if (f) print v, f, n, r, h, m }' "$OUT/sass-$v.txt"
  done
  echo "(columns: binary, function, instructions, R2UR, HGMMA, MOV)"
  xz -T4 "$OUT"/sass-*.txt
  lap sass
fi
if has 4; then
  for fmt in "" "--kv-format bf16"; do
    timeout 100 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --verify $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
  for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
  timeout 150 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1024 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
  echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  lap verify
fi
if has 5; then
  for v in new s2; do
    timeout 100 .devrun/$v/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v.json" 2> "$OUT/e2e-$v.err"
    echo "e2e bf16 $v rc=$?"; show_e2e "$OUT/e2e-$v.json" | grep -v "launched\|one_at"
  done
  lap e2e
fi
if has 6; then
  for v in s2 unif; do
    SC_GPU_CASES=indexer timeout ${MC_T:-150} compute-sanitizer --tool memcheck .devrun/$v/test_gpu_kernels > "$OUT/memcheck-$v.log" 2>&1
    echo "memcheck indexer $v rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$v.log") $(grep -c '^ok' "$OUT/memcheck-$v.log") ok"
  done
  lap memcheck
fi
if has 7; then
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072 \
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum -k 'regex:k_idx|k_rsel|k_topk' \
    --launch-skip 45 --launch-count 18 $B/gpu_bench_kernels --json > "$OUT/ncu-decode128k.log" 2>&1
  echo "ncu decode 128k rc=$?"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration" "$OUT/ncu-decode128k.log" | sed 's/(sc_indexer_args.*)//' | cut -c1-90 | paste - - | awk '{print $1, $2, $(NF)}' | head -20
  lap ncu
fi
cd "$OUT" && tar czf all5.tgz *.json *.jsonl *.log 2>/dev/null; rm -f *.json *.log *.err
