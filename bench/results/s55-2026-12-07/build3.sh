#!/bin/bash
# build3.sh (session 55; from the repository root, ~3 minutes): .devrun/m = HEAD's
# sparsecp (main with device_tokens and step_result.gap_ns, bench e2e's e2e.step_gap),
# beside build1.sh's n and f, for run3.sh (and run2.sh, whose m it replaces).
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun/m
stage_build .devrun/m HEAD - sparsecp
xz -T0 -6 .devrun/m/sparsecp
du -sh .devrun
