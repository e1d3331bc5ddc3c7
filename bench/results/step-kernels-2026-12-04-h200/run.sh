# run.sh - what one decode step of the default model runs on the device, kernel by kernel
# (issue 20: TPOT <= 0.3 ms), 2026-12-04, one H200. From the repository root on the GPU
# machine, binaries in .devrun/ (.devrun/base/: the tree before a change):
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; PART="1 2" bash bench/results/step-kernels-2026-12-04-h200/run.sh
#  PART=1: ncu (each kernel alone, --clock-control none) of COUNT (default 112: two
#          steps) kernels after SKIP (default 1200) of one request of 64 + 64 tokens,
#          P1 N1, NCCL, graphs on: name, grid, duration, in launch order.
#          KERNELS (a regex, default all) limits the kernels profiled.
#  PART=3: validation: test_gpu_kernels, test_gpu_graphs, run --verify at P2 N2.
#  PART=4: tests/gpu/recovery_gpu.sh part 5 (a device fault on ranks sharing the GPU
#          under MPS, now overlapped by default).
#  PART=5: bench e2e --device cuda of the tree in .devrun.
#  PART=2: default model decode TPOT at one rank (4 requests 500 ms apart), the binaries of
#          BINS (default "new base") in turn, ROUNDS times (default 3).
. bench/device_common.sh
requests 4 500 "$OUT/req4.jsonl"
printf '{"prompt_len": 64, "max_tokens": 64}\n' > "$OUT/req1.jsonl"
run1="--device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json"
if has 1; then
  timeout 300 ncu --clock-control none --target-processes all -k regex:"${KERNELS:-.}" --launch-skip ${SKIP:-1200} --launch-count ${COUNT:-112} \
    --section LaunchStats --section SpeedOfLight .devrun/sparsecp run $run1 --requests "$OUT/req1.jsonl" > "$OUT/ncu-step.txt" 2>&1
  echo "ncu step rc=$?"
  python3 - "$OUT/ncu-step.txt" <<'PY'
import re, sys
name = None; tot = 0.0; rows = []
for l in open(sys.argv[1]):
    m = re.match(r"^  (?:void )?([\w:]+)(<.*?>)?\(.*\) \(([\d, ]+)\)x\(([\d, ]+)\)", l)
    if m: name = m.group(1)[:40] + " grid(" + m.group(3) + ")x(" + m.group(4) + ")"
    m = re.search(r"Duration\s+(\S+)\s+([\d.,]+)", l)
    if m and name:
        v = float(m.group(2).replace(",", "")); v = v / 1000 if m.group(1) == "ns" else v * 1000 if m.group(1) == "ms" else v
        rows.append((name, v)); tot += v; name = None
for n, v in rows: print(f"    {n:70s} {v:8.2f} us")
print(f"  {len(rows)} kernels, {tot:.1f} us")
PY
  lap ncu
fi
if has 3; then
  gpu_tests
  verify_p2n2
  lap validation
fi
if has 2; then
  tpot_alternating "${ROUNDS:-3}" "${BINS:-new base}" "$OUT/req4.jsonl"
  lap tpot
fi
if has 4; then
  SC_RECOVERY_PARTS="5" timeout 150 tests/gpu/recovery_gpu.sh > "$OUT/recovery_gpu.log" 2>&1
  echo "recovery_gpu part 5 rc=$?"; grep -E "^==|rc=|expected|identical|differ" "$OUT/recovery_gpu.log" | head -8
  lap recovery
fi
if has 5; then
  e2e_each new
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.log *.json *.err *.jsonl ncu-*.txt
