# run.sh - one decode token's indexer over a long context (issue 18: TPOT at 128k <= 1.3x
# a short context's), 2026-12-04, one H200. From the repository root on the GPU machine,
# binaries in .devrun/ (.devrun/base/: the tree before the change, for a baseline):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1" bash bench/results/select-2026-12-04-h200/run.sh
#  PART=1: ncu (durations, grids) of every kernel of the indexer op, model-long's shape (4
#          heads x 64, f32 keys, top-K 2048), one token over 32768 and over 131072 keys;
#          the second and third calls of the op (the first is a warm-up).
#  PART=2: kernel.indexer of each binary of BINS (default "new base"), alternating, twice.
#  PART=3: bench e2e --device cuda of each binary of BINS.
#  PART=5: test_gpu_kernels' indexer cases.
#  PART=6: compute-sanitizer memcheck of test_gpu_kernels' indexer cases.
#  PART=4: validation: test_gpu_kernels, test_gpu_graphs, run --verify at P2 N2 (f32, bf16).
. bench/device_common.sh
if has 1; then
  for keys in 32768 131072; do
    SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=$keys timeout 200 \
      ncu --clock-control none -k regex:'k_idx|k_rsel|k_topk' --launch-skip ${SKIP:-9} --launch-count ${COUNT:-18} --section SpeedOfLight --section LaunchStats \
      ${NCU_BIN:-.devrun/gpu_bench_kernels} --json > "$OUT/ncu-$keys.txt" 2>&1
    echo "ncu one token over $keys keys rc=$?"
    python3 - "$OUT/ncu-$keys.txt" <<'PY'
import re, sys
name = None
for l in open(sys.argv[1]):
    m = re.match(r"^  (?:void )?(\w+)(<.*?>)?\(.*\) \(([\d, ]+)\)x\(([\d, ]+)\)", l)
    if m: name = m.group(1) + " grid(" + m.group(3) + ")"
    m = re.search(r"Duration\s+(\S+)\s+([\d.,]+)", l)
    if m and name: print(f"    {name:40s} {m.group(2):>10s} {m.group(1)}"); name = None
PY
  done
  lap ncu
fi
if has 2; then
  indexer_alternating "${BINS:-new base}"
  lap kernels
fi
if has 3; then
  e2e_each "${BINS:-new base}"
  lap e2e
fi
if has 5; then
  indexer_tests
  lap tests
fi
if has 6; then
  memcheck_indexer
  lap memcheck
fi
if has 4; then
  gpu_tests
  verify_p2n2
  lap validation
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err ncu-*.txt
