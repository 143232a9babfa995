# The two commands of the quick start, and a few more for development.
#   make demo   build, start the local fleet, run the main job through the falcon CLI
#   make test   build with AddressSanitizer + UBSan and -Werror, run every test
# Each installs missing Debian packages first (scripts/setup.sh).
JOBS ?= 2
BUILD_DIR ?= build/release
TEST_DIR ?= build/asan

.PHONY: all setup build build-test demo test bench format clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DFALCON_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

build-test: setup
	@cmake -S . -B $(TEST_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFALCON_WERROR=ON \
	  -DFALCON_SANITIZE=address,undefined -DFALCON_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(TEST_DIR) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

test: build-test
	@cd $(TEST_DIR) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

bench: setup
	@bash bench/run

format:
	@find include src cli tools tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf build
