#!/bin/bash
# recovery_gpu.sh - recovery on one GPU (issue 22), what one device call runs, logs under
# $OUT. Expects .devrun/sparsecp with its libraries (.devrun/lib) and the source tree.
#  1. ranks sharing the GPU (host collectives, buffers staged): tests/cli/recovery_cli.sh
#     with --device cuda: a killed node rejoins and the clients' tokens are those of an
#     undisturbed run; a killed head restarts the cluster; a node that keeps dying ends it;
#  2. a desync on ranks sharing the GPU: the step is refused and run again, the cluster
#     serves on;
#  3. a device fault on a one-rank NCCL cluster: the request fails, the cluster ends, launch
#     starts it again and a new request is served;
#  4. a step that fails on a one-rank NCCL cluster (a wrong plan acknowledgement): the
#     head rebuilds the NCCL communicators (generation 1, a fresh unique id) and runs the
#     step again; the request gets the tokens of 3.'s undisturbed request;
#  5. a device fault on ranks sharing the GPU under the cluster's MPS server (docs/cuda.md,
#     "Ranks sharing a GPU"): the fault reaches every rank's context, the head among them,
#     so the request fails, launch starts the whole cluster again (the same MPS daemon,
#     a new server) and a new request is served.
# SC_RECOVERY_PARTS: the parts to run (default "1 2 3 4 5"; SC_ONLY_DEVFAULT=1: "3 4").
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bin=$PWD/.devrun/sparsecp
model=$PWD/examples/model-small.json
fail=0
field() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    if "\"launched\"" in l: print(json.loads(l)[sys.argv[2]])' "$1" "$2"; }
await() { for _ in $(seq 300); do grep -q "$2" "$1" && return 0; sleep 0.1; done; return 1; }
ask() { "$bin" submit --connect "$1" --vocab 4096 --prompt-len 40 --seed 3 --max-tokens 64 --json --timeout 60; }

parts=${SC_RECOVERY_PARTS:-1 2 3 4 5}
[ "${SC_ONLY_DEVFAULT:-0}" = 1 ] && parts="3 4"
part() { [[ " $parts " == *" $1 "* ]]; }

if part 1; then
echo "== 1. recovery_cli.sh --device cuda"
SC_LAUNCH_EXTRA="--device cuda" timeout 300 tests/cli/recovery_cli.sh "$bin" "$PWD" > "$OUT/recovery_cli.log" 2>&1
rc=$?; echo "rc=$rc"; tail -3 "$OUT/recovery_cli.log"; [ $rc = 0 ] || fail=1
fi

if part 2; then
echo "== 2. desync, ranks sharing the GPU"
"$bin" launch --device cuda --pcp 2 --dcp 2 --model "$model" --inject desync:1:3 > "$OUT/d.out" 2> "$OUT/d.err" &
lp=$!
await "$OUT/d.out" '"launched"' || { echo "no launched line"; fail=1; }
L=$(field "$OUT/d.out" listen)
ask "$L" > "$OUT/d1.json"; echo "first request rc=$? (0 expected: its refused step is run again)"
head -c 400 "$OUT/d1.json"; echo
ask "$L" > "$OUT/d2.json"; rc=$?; echo "second request rc=$rc (0 expected)"; [ $rc = 0 ] || fail=1
kill -TERM $lp; wait $lp; echo "launch rc=$?"
fi

tok() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("tokens"))' "$1"; }

if part 3; then
echo "== 3. devfault, one-rank NCCL cluster"
"$bin" launch --device cuda --collectives nccl --gpus 1 --pcp 1 --model "$model" --inject devfault:0:3 > "$OUT/f.out" 2> "$OUT/f.err" &
lp=$!
await "$OUT/f.out" '"launched"' || { echo "no launched line"; fail=1; }
L=$(field "$OUT/f.out" listen)
ask "$L" > "$OUT/f1.json"; echo "first request rc=$? (1 expected: the device failed)"
head -c 400 "$OUT/f1.json"; echo
await "$OUT/f.out" '"event":"restarted","rank":0' || { echo "the cluster was not started again"; fail=1; }
ok=1
for _ in $(seq 100); do ask "$L" > "$OUT/f2.json" && { ok=0; break; }; sleep 0.3; done
echo "request after the restart rc=$ok (0 expected)"; [ $ok = 0 ] || fail=1
cat "$OUT/f.out"
kill -TERM $lp; wait $lp; echo "launch rc=$?"
fi

if part 4; then
echo "== 4. a failed step on a one-rank NCCL cluster: rebuilt communicators, step run again"
"$bin" launch --device cuda --collectives nccl --gpus 1 --pcp 1 --model "$model" --inject badack:0:3 > "$OUT/b.out" 2> "$OUT/b.err" &
lp=$!
await "$OUT/b.out" '"launched"' || { echo "no launched line"; fail=1; }
L=$(field "$OUT/b.out" listen)
ask "$L" > "$OUT/b1.json"; rc=$?; echo "request rc=$rc (0 expected)"; [ $rc = 0 ] || fail=1
grep -E 'generation 1 of the collectives|run it again|communicators of generation' "$OUT/b.err"
grep -q 'collectives is ready on all' "$OUT/b.err" || { echo "no rebuild"; fail=1; }
[ "$(tok "$OUT/b1.json")" = "$(tok "$OUT/f2.json")" ] && echo "tokens identical to 3.'s" || { echo "tokens differ"; fail=1; }
kill -TERM $lp; wait $lp; echo "launch rc=$?"
fi

if part 5; then
echo "== 5. devfault, ranks sharing the GPU under MPS"
"$bin" launch --device cuda --pcp 2 --dcp 2 --mps on --model "$model" --inject devfault:1:3 > "$OUT/m.out" 2> "$OUT/m.err" &
lp=$!
await "$OUT/m.out" '"launched"' || { echo "no launched line"; fail=1; }
L=$(field "$OUT/m.out" listen)
ask "$L" > "$OUT/m1.json"; echo "first request rc=$? (1 expected: the GPU's contexts failed)"
head -c 400 "$OUT/m1.json"; echo
ok=1
if await "$OUT/m.out" '"event":"restarted","rank":0'; then
  for _ in $(seq 30); do ask "$L" > "$OUT/m2.json" && { ok=0; break; }; sleep 0.3; done
else
  echo "the cluster was not started again"; fail=1
fi
echo "request after the restart rc=$ok (0 expected)"; [ $ok = 0 ] || fail=1
if [ -f "$OUT/f2.json" ]; then
  [ "$(tok "$OUT/m2.json")" = "$(tok "$OUT/f2.json")" ] && echo "tokens identical to 3.'s" || { echo "tokens differ"; fail=1; }
fi
cat "$OUT/m.out"
kill -TERM $lp; wait $lp; echo "launch rc=$?"
fi
exit $fail
