#!/bin/bash
# gpu_e2e.sh - the pipeline on H200 GPUs (issues 7 and 8), run on the GPU machine from the
# repository root with the CUDA build of sparsecp and its libraries in $DEVRUN (default
# .devrun-e2e/; cuBLAS and NCCL come from the machine). Writes one JSON per run under $OUT and prints a summary.
#   - four ranks sharing GPU 0 (host collectives, device buffers staged through host
#     memory) and one rank with a one-rank NCCL communicator, each --verify'd against
#     one rank on the same GPU and against the single-rank CPU reference;
#   - a device fault (--inject devfault) on ranks sharing GPU 0;
#   - with two or more GPUs: P = N = 2 on two GPUs with NCCL (verified), desync, kill and
#     device faults on NCCL, time to first token / per output token of one long prompt at
#     P = N = 1 versus P = N = 2, and a bare NCCL all-gather for the bandwidth reference.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/sc-gpu-e2e.XXXXXX) # this run's request files and scripts
trap 'rm -rf "$TMP"' EXIT
DEVRUN=${DEVRUN:-.devrun-e2e}
. tests/gpu/cuda_env.sh "$PWD/$DEVRUN/lib"
export NCCL_NVLS_ENABLE=0
B=${SPARSECP_BIN:-$DEVRUN/sparsecp}
ngpu=$(nvidia-smi -L | wc -l)
{ nvidia-smi -L; date -u; } | tee "$OUT/machine.txt"

failed=0 # the exit status: 1 when a run ended otherwise than expected
run() { # name, then sparsecp run arguments; WANT_RC (default 0) is the expected status
  local name=$1
  shift
  local t0=$(date +%s.%N)
  timeout "${LIMIT:-240}" $B run --json ${QUIET---quiet} "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"
  local rc=$?
  if [ "$rc" != "${WANT_RC:-0}" ]; then
    echo "$name: exit status $rc, expected ${WANT_RC:-0}"
    failed=1
  fi
  python3 - "$OUT/$name.json" "$name" "$rc" "$t0" <<'PY'
import json, sys, time
path, name, rc, t0 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name:22s} rc={rc} no JSON ({e})"); sys.exit(0)
v = d.get("verify", {})
vc = d.get("verify_cpu", {})
print(f"{name:22s} rc={rc} ok={d.get('ok')} gen={d.get('generated_tokens')} "
      f"ttft_p50={d.get('ttft_ms_p50')} tpot_p50={d.get('tpot_ms_p50')} tok/s={d.get('tokens_per_s')} "
      f"verify={v} verify_cpu={vc} failed_at={d.get('failed_at_s')} elapsed={d.get('elapsed_s')} wall={time.time()-t0:.1f}s "
      f"err={str(d.get('error',''))[:300]}")
PY
}

S=tests/pipeline/stream.jsonl
M=examples/model-small.json
PARTS=${PARTS:-verify,faults,long,collbw,bandwidth} # a subset reruns part of the work
has() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
has verify && {
run cuda_p4n4_sharing_gpu0 --pcp 4 --dcp 4 --device cuda --gpus 1 --model $M --requests $S --token-budget 24 --verify
run cuda_p1_nccl_one_rank --pcp 1 --dcp 1 --device cuda --collectives nccl --gpus 1 --model $M --requests $S --verify
run cuda_p2n2_default_model --pcp 2 --dcp 2 --device cuda --gpus 1 --verify
}
# a kernel faults on rank 1 (an illegal address): the step fails with EDEVICE and the
# cluster stops (staged host collectives would otherwise go on failing every step)
has faults && WANT_RC=1 run cuda_devfault_sharing_gpu0 --pcp 2 --dcp 2 --device cuda --gpus 1 --model $M --requests $S --inject devfault:1:3
if [ "$ngpu" -ge 2 ]; then
  has verify && {
  run nccl_p2n2_2gpu --pcp 2 --dcp 2 --device cuda --collectives nccl --gpus 2 --model $M --requests $S --token-budget 24 --verify
  run nccl_p2n1_2gpu --pcp 2 --dcp 1 --device cuda --collectives nccl --gpus 2 --model $M --requests $S --token-budget 24 --verify
  }
  has faults && {
  WANT_RC=1 run nccl_desync_2gpu --pcp 2 --dcp 2 --device cuda --collectives nccl --gpus 2 --model $M --requests $S --inject desync:1:3
  WANT_RC=1 run nccl_kill_2gpu --pcp 2 --dcp 2 --device cuda --collectives nccl --gpus 2 --model $M --requests $S --inject kill:1:3
  WANT_RC=1 run nccl_devfault_2gpu --pcp 2 --dcp 2 --device cuda --collectives nccl --gpus 2 --model $M --requests $S --inject devfault:1:3
  }
  has long && for L in ${LONG_LENS:-32768 131072}; do
    printf '{"prompt_len": %d, "max_tokens": 32}\n' $L > $TMP/long$L.jsonl
    common="--device cuda --collectives nccl --model examples/model-long.json --requests $TMP/long$L.jsonl --token-budget $L --max-model-len $((L + 64)) --clients 1 --deadline-ms 60000"
    LIMIT=280 run long${L}_p1n1 --pcp 1 --dcp 1 --gpus 1 --num-blocks $((L / 16 + 64)) $common
    LIMIT=280 run long${L}_p2n2 --pcp 2 --dcp 2 --gpus 2 --num-blocks $((L / 32 + 64)) $common
  done
  # the pipeline's own collectives on a 32k prompt: per-purpose device time and bus
  # bandwidth (CUDA events around each NCCL call), from the nodes' info logs
  has collbw && {
    printf '{"prompt_len": 32768, "max_tokens": 32}\n' > $TMP/collbw.jsonl
    SPARSECP_LOG=info QUIET= LIMIT=280 run collbw_32k_p2n2 --pcp 2 --dcp 2 --gpus 2 --device cuda \
      --collectives nccl --model examples/model-long.json --requests $TMP/collbw.jsonl \
      --token-budget 32768 --max-model-len 32832 --num-blocks 1088 --clients 1 --deadline-ms 60000
    grep "collectives" "$OUT/collbw_32k_p2n2.err" | sed 's/^ *[0-9.]* //' | tee "$OUT/collbw.txt"
  }
  # bare NCCL all-gather between the two GPUs (the bandwidth reference), with PyTorch's
  # own CUDA and NCCL libraries (not ours on LD_LIBRARY_PATH)
  # (torch's spawn re-imports the main module, so the script must be a file)
  has bandwidth && cat > $TMP/sc_nccl_allgather.py <<'PY'

import json, os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
def work(rank, world, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    rows = []
    for mib in (1, 8, 42, 128):
        n = mib * (1 << 20) // 4
        x = torch.ones(n, device="cuda"); y = torch.empty(n * world, device="cuda")
        for _ in range(5): dist.all_gather_into_tensor(y, x)
        torch.cuda.synchronize(); t = time.perf_counter(); it = 30
        for _ in range(it): dist.all_gather_into_tensor(y, x)
        torch.cuda.synchronize(); dt = (time.perf_counter() - t) / it
        algbw = n * 4 * world / dt / 1e9
        rows.append({"per_rank_mib": mib, "seconds": dt, "algbw_gbs": algbw, "busbw_gbs": algbw * (world - 1) / world})
    if rank == 0:
        json.dump({"world": world, "results": rows}, open(out, "w"), indent=1)
        for r in rows: print(r)
    dist.destroy_process_group()
if __name__ == "__main__":
    import socket
    with socket.socket() as s:  # an ephemeral port that is free now, never a fixed one
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(work, args=(2, sys.argv[1], port), nprocs=2)
PY
  has bandwidth && env -u LD_LIBRARY_PATH python3 $TMP/sc_nccl_allgather.py "$OUT/nccl_allgather.json" 2>&1 | tail -30
fi
echo done
exit $failed
