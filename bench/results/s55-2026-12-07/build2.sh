#!/bin/bash
# build2.sh (session 55; from the repository root, ~3 minutes): adds .devrun/m = HEAD's
# sparsecp (main with only rank 0 reading the tokens, 'device_tokens') beside build1.sh's
# n and f, for run2.sh.
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun/m
stage_build .devrun/m HEAD - sparsecp
xz -T0 -6 .devrun/m/sparsecp
du -sh .devrun
