#!/bin/bash
# run3.sh - session 41's third call, on main at b0fa85d (binaries of build/ in .devrun/new:
# sparsecp, test_gpu_kernels, test_gpu_graphs, gpu_bench_kernels; ~6 minutes): the whole
# test_gpu_kernels (the kv_write case now compares the CPU's fp8_ds_mla bytes, the
# few-heads loads in one function) and test_gpu_graphs; memcheck of the attention batch
# invariance case (the few-heads kernel's fp8 tiles among them); run --verify P2 N2 over
# f32 and bf16 rows with TF32 gemms, over fp8_ds_mla rows, and model-long with two 8k
# prompts over bf16 rows with TF32 gemms (the DCP merge and workspace paths at K 2048);
# bench e2e over bf16 rows with TF32 gemms twice and with f32 gemms once.
. bench/device_common.sh
B=.devrun/new
timeout 200 $B/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head
timeout 100 $B/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
SC_GPU_CASES=attention_batch_invariance timeout 150 compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-attn.log" 2>&1
echo "memcheck attention_batch_invariance rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-attn.log")"
lap tests
for a in "f32 tf32" "bf16 tf32" "fp8_ds_mla f32"; do set -- $a
  timeout 100 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --verify --kv-format $1 --gemm-precision $2 > "$OUT/verify-$1-$2.log" 2>&1
  echo "verify P2 N2 $1 gemm $2 rc=$? $(grep -E 'verify|error' "$OUT/verify-$1-$2.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 200 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --gemm-precision tf32 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1100 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 tf32 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
for g in tf32 f32 tf32; do
  timeout 100 $B/sparsecp bench e2e --device cuda --kv-format bf16 --gemm-precision $g --json > "$OUT/e2e-$g.json" 2> "$OUT/e2e-$g.err"
  echo "e2e bf16 gemm $g rc=$?"; show_e2e "$OUT/e2e-$g.json" | grep -v "launched\|one_at"
done
lap e2e
cd "$OUT" && tar czf all3.tgz *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err *.jsonl
