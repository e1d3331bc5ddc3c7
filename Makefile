# Thin wrapper around CMake. Fresh machine: `make run` and `make test` (both install
# missing Debian packages first). Build folders: build/ (normal), build-asan/ (ASan+UBSan),
# build-tsan/ (ThreadSanitizer).

BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
SPARSECP   := $(BUILD)/tools/sparsecp

# Debian packages the build and tests need (checked one by one, installed if missing).
DEB_PACKAGES := cmake make gcc pkg-config clang libclang-rt-14-dev \
                libzmq3-dev libmsgpack-dev libuv1-dev libcriterion-dev \
                libopenblas-dev libjansson-dev libjemalloc-dev procps python3-zmq \
                libmicrohttpd-dev python3-prometheus-client curl python3-httpx \
                python3-pydantic python3-anyio python3-sniffio python3-tqdm python3-distro \
                libpcre2-dev

.PHONY: all deps configure build run test test-asan test-tsan bench-plan clean fuzz

all: build

# Installs only what is missing; runs `apt-get update` first when the package lists are
# absent, and once more if an install fails on stale lists. Idempotent.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  echo "make deps: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || $$sudo apt-get update -qq; \
	  $$sudo apt-get install -y -qq $$missing || { $$sudo apt-get update -qq && $$sudo apt-get install -y -qq $$missing; }; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: a local PCP2 x DCP2 CPU cluster serves examples/requests.jsonl, then a
# single-rank cluster serves it again and the generated tokens are compared.
run: build
	$(SPARSECP) run --verify

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-tsan

# Unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSC_SANITIZE=ON -DSC_CUDA=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -L unit

# The main job and the in-process message benchmark under ThreadSanitizer (build-tsan/;
# libzmq's own synchronization is invisible to it: tests/tsan/zmq.supp). The Criterion
# suites cannot start under TSan, so this is the race check of the runtime.
TSAN_BUILD ?= build-tsan
test-tsan: deps
	tests/tsan/run.sh $(CURDIR) $(TSAN_BUILD)

bench-plan: build
	$(SPARSECP) bench plan

# libFuzzer over the untrusted message decoder: clang build in build-fuzz/, runs
# FUZZ_SECONDS (default 60) over tests/fuzz/corpus, new inputs go to build-fuzz/corpus.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz: deps
	tests/fuzz/run_fuzz.sh $(CURDIR) $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
