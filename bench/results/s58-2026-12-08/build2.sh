#!/bin/bash
# build2.sh (session 58; from the repository root, ~3 minutes): .devrun/d = branch
# wip/defer-weights (main + the ranks of a GPU's group never building weights of their
# own: member 0 builds them into the exported memory, the others map it), sparsecp only,
# for run2.sh. Beside build1.sh's .devrun/l (main), both within one call's 64 MiB.
set -euo pipefail
. bench/device_build.sh
rm -rf .devrun/d
stage_build .devrun/d "${REV:-wip/defer-weights}" - sparsecp
stage_pack .devrun/d/*
