#!/bin/sh
# run_fuzz.sh SRC_DIR BUILD_DIR SECONDS
# Builds the libFuzzer target fuzz_messages with clang (-fsanitize=fuzzer,address,
# undefined) in its own build folder and runs it for SECONDS over the committed seed
# corpus, writing new inputs to BUILD_DIR/corpus. Exits 77 (ctest SKIP_RETURN_CODE) when
# clang or its fuzzer runtime is missing. Used by `make fuzz` and the ctest test
# fuzz_messages_short.
set -eu
src=$1 build=$2 seconds=$3
if ! command -v clang >/dev/null 2>&1; then
  echo "SKIP: clang not found (install clang and libclang-rt-14-dev)"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$tmp/probe.c"
if ! clang -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
  echo "SKIP: clang's libFuzzer runtime is missing (install libclang-rt-14-dev)"; exit 77
fi
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DSC_FUZZ=ON -DSC_CUDA=OFF \
  -DSC_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS=$flags" >/dev/null
cmake --build "$build" --target fuzz_messages -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
mkdir -p "$build/corpus"
exec "$build/tests/fuzz/fuzz_messages" -max_total_time="$seconds" -print_final_stats=1 \
  -rss_limit_mb=2048 -timeout=10 "$build/corpus" "$src/tests/fuzz/corpus"
