#!/bin/bash
# build.sh - on the build machine, from the repository root: builds the binaries that
# run3.sh compares (main and main with the patches of pending/ applied in turn; new3 also
# sparsecp and test_gpu_graphs, for run3.sh's pipeline checks) and stages them xz'd into
# .devrun/{main,new,new2,new3,new4} with .devrun/lib and .devrun/whl (variants.sh). Then
# call the device with carry [".devrun"] and run3.sh (see its header). (Session 34 ran it
# at 2dcc594, where the first two patches were not yet on main; on a later main they no
# longer apply.)
. bench/results/attn-cross-2026-12-05/variants.sh
build_variant main "" ""
build_variant new "1-pfree" ""
build_variant new2 "1-pfree 2-lines" ""
build_variant new3 "1-pfree 2-lines 3-cols" "" "sparsecp test_gpu_graphs"
build_variant new4 "1-pfree 2-lines 3-cols" "-DWS_C0=64"
stage_devrun new3 main new new2 new4
