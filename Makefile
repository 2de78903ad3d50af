# cpparity — the two commands of the README:
#   make run    install what is missing, build, run the default suite on CPU ranks
#   make test   install what is missing, build, run every test (unit, sanitized, CLI)
# Other targets: make build, make format, make clean.

BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# Debian packages the project builds and tests with.
DEBIAN_PACKAGES := cmake make gcc pkg-config git libcriterion-dev libopenmpi-dev openmpi-bin \
                   libhdf5-dev libopenblas-dev libyaml-dev clang-format valgrind \
                   python3 python3-torch python3-h5py python3-numpy

# nvcc is found on PATH, else at the CUDA toolkit's usual place; CUDA code is built only then.
CUDACXX ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifneq ($(CUDACXX),)
export CUDACXX
endif

.PHONY: all deps configure build test run format clean

all: build

deps:
	@scripts/install-dependencies.sh $(DEBIAN_PACKAGES)

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The CI suite on 2 ranks (COMM=local threads by default, COMM=mpi through mpirun), into a new
# dated results file and Markdown report; results/latest.h5 and results/latest.md then point at
# them (replaced atomically).
COMM ?= local
RANKS ?= 2
MPIRUN_FLAGS ?= --oversubscribe $(shell [ "$$(id -u)" = 0 ] && echo --allow-run-as-root)
run: build
	@mkdir -p results
	@stamp=$$(date -u +%Y%m%dT%H%M%SZ); out=results/$$stamp.h5; report=results/$$stamp.md; \
	if [ "$(COMM)" = mpi ]; then \
	  mpirun -np $(RANKS) $(MPIRUN_FLAGS) $(BUILD_DIR)/cpparity run cases/ci.yaml \
	    --out $$out --markdown $$report; \
	else \
	  $(BUILD_DIR)/cpparity run cases/ci.yaml --comm local --ranks $(RANKS) \
	    --out $$out --markdown $$report; \
	fi; code=$$?; \
	for file in $$out $$report; do \
	  if [ -f $$file ]; then name=$$(basename $$file); link=results/latest.$${name##*.}; \
	    ln -sfn $$name $$link.tmp && mv -Tf $$link.tmp $$link && echo "$$link -> $$file"; fi; \
	done; \
	exit $$code

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD_DIR)
