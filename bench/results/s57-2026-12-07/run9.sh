#!/bin/bash
# run9.sh (session 57): wip/readback (.devrun/z, b954d83 by ../s56-2026-12-07/build7.sh)
# before it is merged: session 56's run8.sh (case_notify, device_fault, one rank's TPOT
# and device gap with copies against kernels, three rounds), then all of its
# test_gpu_kernels, run --verify at P2 N2 and the fault injections desync / devfault /
# kill at P2 N2 over ipc (~4 min).
. bench/device_common.sh
bash bench/results/s56-2026-12-07/run8.sh
BIN=.devrun/z kernel_tests_all
lap kernels
BIN=.devrun/z verify_p2n2
lap verify
for inj in desync:1:5 devfault:1:5 kill:1:5; do
  f="$OUT/inject-${inj%%:*}"
  timeout 100 .devrun/z/sparsecp run --device cuda --pcp 2 --dcp 2 --collectives ipc --mps on --inject $inj > "$f.log" 2>&1
  echo "inject $inj rc=$?"; grep -E "desync|abort|rebuil|recover|fail|finished" "$f.log" | head -6
done
lap faults
cd "$OUT" && tar czf checks.tgz *.log 2>/dev/null; rm -f *.log
