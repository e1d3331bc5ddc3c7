#!/bin/bash
# call1.sh (session 57): run9.sh (wip/readback's checks) then run10.sh (shared weights).
timeout 300 bash bench/results/s57-2026-12-07/run9.sh
timeout 250 bash bench/results/s57-2026-12-07/run10.sh
