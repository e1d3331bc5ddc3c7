#!/bin/bash
# build6.sh - stages run7.sh (from the repository root): main 5d50313 into .devrun/m and
# main with rank.patch (the select's ranks in its cooperative launch, its keys loaded four
# at a time) into .devrun/r, each with sparsecp and every GPU test (session 49's
# build2.sh).
here=$(cd "$(dirname "$0")" && pwd)
SIDES="m: r:../s51-2026-12-07/rank.patch" FULL="m r" BASE=5d50313 exec bash "$here/../s49-2026-12-07/build2.sh"
