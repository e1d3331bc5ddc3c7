#!/bin/bash
# run1.sh - session 41's first call (binaries: build.sh; carry [".devrun"]: export
# LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run1.sh; ~6 minutes): kvfp8's whole
# test_gpu_kernels (fast's changes, main's 88edd29 and the few-heads kernel over fp8
# rows) and test_gpu_graphs; run --verify at P2 N2 over f32, bf16 and fp8_ds_mla rows;
# bench e2e bf16 of main, fast and kvfp8 alternating twice, and kvfp8's fp8_ds_mla rows
# twice.
. bench/device_common.sh
F=.devrun/kvfp8
timeout 200 $F/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head
grep -E "attn fmt=3 tok=[0-9]+ heads=(8|16|5|12) " "$OUT/test_kernels.log" | cut -c1-160 | head -8
timeout 100 $F/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
lap tests
for fmt in f32 bf16 fp8_ds_mla; do
  timeout 100 $F/sparsecp run --device cuda --pcp 2 --dcp 2 --verify --kv-format $fmt > "$OUT/verify-$fmt.log" 2>&1
  echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify|error' "$OUT/verify-$fmt.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
lap verify
for r in 1 2; do for v in main fast kvfp8; do
  timeout 100 .devrun/$v/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v-$r.json" 2> "$OUT/e2e-$v-$r.err"
  echo "e2e bf16 $v $r rc=$?"; show_e2e "$OUT/e2e-$v-$r.json" | grep -v "launched\|one_at"
done
  timeout 100 $F/sparsecp bench e2e --device cuda --kv-format fp8_ds_mla --json > "$OUT/e2e-fp8-$r.json" 2> "$OUT/e2e-fp8-$r.err"
  echo "e2e fp8_ds_mla kvfp8 $r rc=$?"; show_e2e "$OUT/e2e-fp8-$r.json"; tail -2 "$OUT/e2e-fp8-$r.err" | cut -c1-200
done
lap e2e
cd "$OUT" && tar czf all1.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
