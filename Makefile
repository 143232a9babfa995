# The two commands of the quick start, and a few more for development.
#   make demo   build, start the local fleet, run the main job through the falcon CLI, then
#               the same through `falcon serve` (select twice, the second from its cache); it
#               prints the dashboard's URL and keeps the server up until Enter
#               (`make demo DEMO_ARGS=--no-wait` does not wait)
#   make test   build with AddressSanitizer + UBSan and -Werror and run every test; build the
#               optimised library, CLI and fleet with -Werror (warnings only -O2 shows); build
#               the fuzz targets with clang and run each for FUZZ_SECONDS; build the Python
#               module without sanitizers and run its pytest suite (docs/testing.md)
#   make python-test   only the last step
#   make python-demo   examples/business_layer.py, the business flow in Python, against the fleet
# Each installs missing Debian packages first (scripts/setup.sh).
JOBS ?= 2
BUILD_DIR ?= $(WERROR_DIR)
DEMO_ARGS ?=
TEST_DIR ?= build/asan
WERROR_DIR ?= build/release-werror
FUZZ_DIR ?= build/fuzz
FUZZ_SECONDS ?= 20
# Debug information of the test build: line tables only (-g1), enough for every sanitizer
# report's file:line and a quarter less compile time than -g; TEST_DEBUG_FLAGS=-g for a
# debugger's view of local variables.
TEST_DEBUG_FLAGS ?= -g1
# The Python module is built in the -Werror release tree: one optimised configuration for both.
PYTHON_DIR ?= $(WERROR_DIR)
# The interpreter the module is built for and tested with: Debian's, not a pyenv shim on PATH.
PYTHON ?= /usr/bin/python3
# The optimised, non-sanitized configuration with -Werror: the library, the CLI, the fleet's
# tools, the benchmarks and the Python module (position-independent for it).
RELEASE_WERROR_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=Release -DFALCON_WERROR=ON \
  -DFALCON_BUILD_TESTS=OFF -DFALCON_BUILD_BENCH=ON -DFALCON_PYTHON=ON -DPython_EXECUTABLE=$(PYTHON)

.PHONY: all setup build build-test build-werror demo test test-unit fuzz-build fuzz python-build python-test python-demo bench format clean

all: build

setup:
	@bash scripts/setup.sh

# The demo's programs only (no benchmarks, no Python module), in the optimised -Werror tree that
# make test builds too: after `make demo`, `make test` compiles only what the demo did not need.
build: setup
	@cmake -S . -B $(BUILD_DIR) $(RELEASE_WERROR_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target falcon falcon-fleet fleet-xpk fleet-gcloud

build-test: setup
	@cmake -S . -B $(TEST_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFALCON_WERROR=ON \
	  -DFALCON_SANITIZE=address,undefined -DFALCON_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_DEBUG=$(TEST_DEBUG_FLAGS) >/dev/null
	@cmake --build $(TEST_DIR) -j $(JOBS)

# Release (-O2) with -Werror: GCC warns about some things (-Wrestrict, -Wmaybe-uninitialized)
# only when optimising. Everything but the tests: the library, the CLI, the fleet's tools, the
# benchmarks and the Python module.
build-werror: setup
	@cmake -S . -B $(WERROR_DIR) $(RELEASE_WERROR_FLAGS) >/dev/null
	@cmake --build $(WERROR_DIR) -j $(JOBS)

# libFuzzer targets (clang, ASan + UBSan), fuzz/.
fuzz-build: setup
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFALCON_FUZZ=ON -DFALCON_SANITIZE=address,undefined -DFALCON_BUILD_TESTS=OFF \
	  -DFALCON_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target falcon_fuzzers

fuzz: fuzz-build
	@bash fuzz/run --build $(FUZZ_DIR) --seconds $(FUZZ_SECONDS) --jobs $(JOBS)

# The Python module (python/) and the fleet's tools, optimised, position-independent, without
# sanitizers (an ASan-built extension cannot be loaded into the stock interpreter), in the
# -Werror release tree (configured as build-werror, so that make test builds it once).
python-build: setup
	@cmake -S . -B $(PYTHON_DIR) $(RELEASE_WERROR_FLAGS) >/dev/null
	@cmake --build $(PYTHON_DIR) -j $(JOBS) --target _falcon falcon falcon-fleet fleet-xpk fleet-gcloud

# pytest (Debian's python3-pytest) against the local fleet; mypy over the example.
python-test: python-build
	@FALCON_BUILD_DIR=$(PYTHON_DIR) $(PYTHON) -m pytest -q -p no:cacheprovider python/tests

# examples/business_layer.py (Python) against the local fleet.
python-demo: python-build
	@PYTHON=$(PYTHON) bash scripts/python-demo.sh $(PYTHON_DIR)

demo: build
	@bash scripts/demo.sh $(DEMO_ARGS) $(BUILD_DIR)

test: build-test build-werror fuzz-build
	@cd $(TEST_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)
	@bash fuzz/run --build $(FUZZ_DIR) --seconds $(FUZZ_SECONDS) --jobs $(JOBS)
	@$(MAKE) --no-print-directory python-test

# The fast loop: the in-process tests only (ctest -L unit), no release or fuzz build.
test-unit: build-test
	@cd $(TEST_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit

bench: setup
	@bash bench/run

format:
	@find include src cli tools tests bench fuzz python/src -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf build
