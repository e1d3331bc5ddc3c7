#!/bin/bash
# build4.sh - stages run4.sh (from the repository root, ~2 minutes): main with
# coop-chunks.patch (coop.patch and the SPARSECP_INDEXER_CHUNKS knob, whose default
# changes nothing) into .devrun/c, with sparsecp and every GPU test (session 49's
# build2.sh).
here=$(cd "$(dirname "$0")" && pwd)
SIDES="c:../s50-2026-12-07/coop-chunks.patch" FULL="c" exec bash "$here/../s49-2026-12-07/build2.sh"
