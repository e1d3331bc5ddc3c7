# run3.sh - the call session 33 prepared and could not run (no device machine started
# after its second call; its device time went to failed starts). It compares k_attn_ws
# of main with three changes kept as patches in pending/ (also branch wip/ws-cols, which
# may not survive into a new checkout), none of them ever run on a GPU:
#   1-pfree.patch  WG1 waits at PFREE too (unaligned barrier.sync on both sides), so that
#                  racecheck can run clean: call 2 reported 15,626 WAR hazards, every one
#                  shown WG1's read of alpha against WG0's next write, ordered by
#                  bar.arrive/bar.sync (PTX orders it; racecheck does not take it)
#   2-lines.patch  bf16 rows copied by 8 lanes a row, 128 contiguous bytes a step (ncu in
#                  call 2: 33% excess shared-memory wavefronts on the 4-lanes-a-row copies)
#   3-cols.patch   WG0's P V over 128 columns of O, WG1's over 384 (ncu in call 2: WG1
#                  waited for WG0's P half its time; a tile is WG0's chain of S, softmax,
#                  P and its half of P V); built with -DWS_C0=64, 64 and 448 columns
# Binaries: `bash bench/results/attn-cross-2026-12-05/build.sh` on the build machine (from
# the repository root; ~4 minutes on 2 cores) builds and stages them, each set
# test_gpu_kernels and gpu_bench_kernels, xz'd (device_common.sh unpacks them):
#   .devrun/main  main before the patches       .devrun/new   + 1-pfree
#   .devrun/new2  + 1-pfree + 2-lines           .devrun/new3  + all three
#   .devrun/new4  all three, CMAKE_CUDA_FLAGS=-DWS_C0=64
# with .devrun/lib and .devrun/whl (39 MB in all on 2026-12-05). Then, with carry
# [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/attn-cross-2026-12-05/run3.sh
# Racecheck of new and new3 (0 hazards expected), synccheck of new3, the attention cases
# of each, kernel.sparse_attn of main / new / new2 / new3 / new4 alternating twice,
# FlashMLA, all of new3's test_gpu_kernels. Merge what passes and gains; then run
# `run --verify` at P2 N2 with bf16 rows on the 2-layer model of model-deep's shape.
. bench/device_common.sh
N=.devrun/new
SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck $N/test_gpu_kernels > "$OUT/racecheck-roles.log" 2>&1
echo "racecheck attention_roles new rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-roles.log" | head -1)"
SC_GPU_CASES=attention_roles timeout 100 compute-sanitizer --tool racecheck .devrun/new3/test_gpu_kernels > "$OUT/racecheck-roles3.log" 2>&1
echo "racecheck attention_roles new3 rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-roles3.log" | head -1)"
SC_GPU_CASES=attention timeout 100 compute-sanitizer --tool synccheck .devrun/new3/test_gpu_kernels > "$OUT/synccheck-attention.log" 2>&1
echo "synccheck attention rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/synccheck-attention.log" | head -1)"
attention_cases new new2 new3 new4
lap checks
attn_alternating main new new2 new3 new4
lap kernels
flashmla_anchor
lap flashmla
# (session 34: new3 also carries sparsecp and test_gpu_graphs) run --verify P2 N2 bf16 on
# the 2-layer model of model-deep's shape, all of test_gpu_kernels, test_gpu_graphs
attn_pipeline_checks .devrun/new3
lap tests
# (session 34) ncu of the fp8_ds_mla decode in clusters, main and new3: what limits it.
# (In call 3 this step filtered by the demangled name k_attn_ws<1, 1>, which matched no
# launch: ncu names it k_attn_ws<(bool)1, (bool)1>; now by the mangled name.)
for v in main new3; do ncu_attn fp8-$v $v decode _Z9k_attn_wsILb1ELb1E; done
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
