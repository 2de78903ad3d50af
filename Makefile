# cpparity — the two commands of the README:
#   make run    install what is missing, build, run the default suite on CPU ranks
#   make test   install what is missing, build, run every test (unit, sanitized, CLI)
# Other targets: make build (everything, tests included), make build-command (the cpparity command
# alone, what `make run` builds), make other-builds, make coverage, make format, make clean,
# make frameworks-matrix (docs/frameworks.md from the external tests' results).
#
# Warnings are errors in `make test` (and so in CI), never in a user's own `make build` or
# `make run`: CMake's CMAKE_COMPILE_WARNING_AS_ERROR is passed on only there.

BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# Debian packages the project builds and tests with. libclang-rt-dev holds clang's sanitizer and
# libFuzzer runtimes (fuzz/): clang only recommends it, and recommends are not installed.
DEBIAN_PACKAGES := cmake make gcc clang libclang-rt-dev pkg-config git libcriterion-dev \
                   libopenmpi-dev openmpi-bin libhdf5-dev libopenblas-dev libyaml-dev clang-format \
                   valgrind python3 python3-venv python3-torch python3-h5py python3-numpy python3-pytest \
                   libjs-chart.js chromium

# nvcc is found on PATH, else at the CUDA toolkit's usual place; CUDA code is built only then.
CUDACXX ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifneq ($(CUDACXX),)
export CUDACXX
endif

WARNINGS_AS_ERRORS ?= OFF

.PHONY: all deps configure build build-command other-builds coverage test run format clean bench \
        frameworks-matrix

all: build

deps:
	@scripts/install-dependencies.sh $(DEBIAN_PACKAGES)

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_COMPILE_WARNING_AS_ERROR=$(WARNINGS_AS_ERRORS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The `cpparity` command alone (run, report, judge, export: the report's Chart.js and styles are
# compiled into it): what `make run` runs, without the tests, their test doubles and sanitized
# copies that `make build` and `make test` build too.
build-command: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target cpparity

# The same sources with gcc at Release (-O3 finds what -O2 misses) and with clang at Debug,
# warnings as errors, and their unit tests: no build type or compiler a user picks may break.
# The clang build also has the loader's libFuzzer target (fuzz/README.md): its `fuzz` tests
# replay the seeds and regressions and fuzz for 60 s. The CUDA sources (when nvcc is found) are
# built at Release here and at RelWithDebInfo by `make build`, not again at Debug: nvcc compiles
# their host code with its own host compiler (g++), whatever the C compiler, so a clang build
# would repeat the Release one at -O0 for half a minute.
OTHER_BUILDS := gcc:Release:cuda clang:Debug:no-cuda
other-builds: deps
	@set -e; for build in $(OTHER_BUILDS); do \
	  compiler=$${build%%:*}; rest=$${build#*:}; type=$${rest%%:*}; cuda=$${rest#*:}; \
	  dir=build-$$compiler-$$type; \
	  echo "== $$compiler $$type build in $$dir ($$cuda)"; \
	  cmake -S . -B $$dir -DCMAKE_C_COMPILER=$$compiler -DCMAKE_BUILD_TYPE=$$type \
	    -DCPPARITY_CUDA=$$([ $$cuda = cuda ] && echo ON || echo OFF) \
	    -DCPPARITY_SANITIZED_TESTS=OFF -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null; \
	  cmake --build $$dir -j $(JOBS); \
	  (cd $$dir && ctest --output-on-failure -j $(JOBS) -L unit); \
	  if [ $$compiler = clang ]; then (cd $$dir && ctest --output-on-failure -j $(JOBS) -L fuzz); fi; \
	done

# Line and branch coverage of distributed/ under the CI suite, with thresholds
# (scripts/coverage.sh); uncovered lines are listed in build-coverage/uncovered.txt.
coverage: deps
	scripts/coverage.sh build-coverage

test: WARNINGS_AS_ERRORS = ON
test: build other-builds coverage
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The CI suite on CPU ranks (COMM=local threads by default, COMM=mpi through mpirun), into a new
# dated results file, Markdown summary and HTML report (`cpparity report`); results/latest.h5,
# results/latest.md and results/latest.html then point at them (replaced atomically), and the
# last line printed is the HTML report's path. The local run takes as many ranks as every cp
# size of the suite needs (nothing is NOT RUN); RANKS=N overrides it, and sets the mpirun -np of
# COMM=mpi.
COMM ?= local
RANKS ?=
MPI_RANKS = $(if $(RANKS),$(RANKS),4)
MPIRUN_FLAGS ?= --oversubscribe $(shell [ "$$(id -u)" = 0 ] && echo --allow-run-as-root)
run: build-command
	@mkdir -p results
	@stamp=$$(date -u +%Y%m%dT%H%M%SZ); out=results/$$stamp.h5; report=results/$$stamp.md; \
	if [ "$(COMM)" = mpi ]; then \
	  mpirun -np $(MPI_RANKS) $(MPIRUN_FLAGS) $(BUILD_DIR)/cpparity run cases/ci.yaml \
	    --out $$out --markdown $$report; \
	else \
	  $(BUILD_DIR)/cpparity run cases/ci.yaml --comm local $(if $(RANKS),--ranks $(RANKS)) \
	    --out $$out --markdown $$report; \
	fi; code=$$?; \
	html=results/$$stamp.html; \
	if [ -f $$out ] && ! $(BUILD_DIR)/cpparity report $$out -o $$html >/dev/null; then \
	  code=$$(( code == 0 ? 3 : code )); fi; \
	for file in $$out $$report $$html; do \
	  if [ -f $$file ]; then name=$$(basename $$file); link=results/latest.$${name##*.}; \
	    ln -sfn $$name $$link.tmp && mv -Tf $$link.tmp $$link && echo "$$link -> $$file"; fi; \
	done; \
	if [ -f $$html ]; then echo "HTML report: $$(pwd)/results/latest.html"; fi; \
	exit $$code

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD_DIR) build-coverage $(foreach build,$(OTHER_BUILDS),build-$(word 1,$(subst :, ,$(build)))-$(word 2,$(subst :, ,$(build))))

# The float64 reference attention next to PyTorch's dense attention on the same shapes, masks and
# thread count, and the ratios (docs/benchmarks.md): THREADS=N (default 1), BENCH_FLAGS for both.
THREADS ?= 1
BENCH_FLAGS ?= --seq-len 4096
# The parity matrix of the judged frameworks: every `external` test run with its results files
# kept, then docs/frameworks.json and docs/frameworks.md made from them (scripts/
# framework_matrix.py; the explanations come from docs/frameworks-notes.md). The PyTorch 2
# environment is made on first use (scripts/torch2-env.sh).
FRAMEWORK_RESULTS = $(abspath $(BUILD_DIR))/framework-results
frameworks-matrix: build
	rm -rf $(FRAMEWORK_RESULTS)
	cd $(BUILD_DIR) && CPPARITY_MATRIX_RESULTS=$(FRAMEWORK_RESULTS) \
	  ctest -L external --output-on-failure -j $(JOBS)
	/usr/bin/python3 scripts/framework_matrix.py collect $(FRAMEWORK_RESULTS) \
	  --cpparity $(BUILD_DIR)/cpparity --notes docs/frameworks-notes.md -o docs/frameworks.json
	/usr/bin/python3 scripts/framework_matrix.py render docs/frameworks.json -o docs/frameworks.md

bench: build
	$(BUILD_DIR)/cpparity bench reference --json --threads $(THREADS) $(BENCH_FLAGS) \
	  > $(BUILD_DIR)/bench-reference.jsonl
	/usr/bin/python3 bench/torch_reference.py --threads $(THREADS) $(BENCH_FLAGS) \
	  > $(BUILD_DIR)/bench-torch.jsonl
	/usr/bin/python3 bench/compare.py $(BUILD_DIR)/bench-reference.jsonl $(BUILD_DIR)/bench-torch.jsonl
