#!/bin/bash
# build9.sh - stages run9.sh (from the repository root, ~3 minutes): main (BASE, default
# HEAD) into .devrun/m (gpu_bench_kernels, sparsecp) and main with fused.patch into
# .devrun/f (sparsecp and every GPU test), through session 49's build2.sh; m's other
# test binaries are dropped for the 64 MiB carry.
here=$(cd "$(dirname "$0")" && pwd)
SIDES="m: f:../s51-2026-12-07/fused.patch" FULL="m f" bash "$here/../s49-2026-12-07/build2.sh" || exit 1
rm -f .devrun/m/test_gpu_*
du -sh .devrun
