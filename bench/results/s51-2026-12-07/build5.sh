#!/bin/bash
# build5.sh - stages run5.sh (from the repository root): this checkout's HEAD into
# .devrun/m with sparsecp and every GPU test (session 49's build2.sh, no patch).
here=$(cd "$(dirname "$0")" && pwd)
SIDES="m:" FULL="m" exec bash "$here/../s49-2026-12-07/build2.sh"
