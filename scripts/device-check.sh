#!/usr/bin/env bash
# device-check.sh OUT — the checks that need a GPU, for a machine with one (an H200 here) that
# may lack the project's Debian libraries: it builds the GPU test programs straight with nvcc
# (no CMake configure, which needs Criterion, HDF5, MPI...), runs them, and writes a table to
# OUT/device-check.md and the logs to OUT/. Exit 0 when every check passed.
set -uo pipefail
out=${1:?usage: scripts/device-check.sh OUT_DIRECTORY}
mkdir -p "$out"
cd "$(dirname "$0")/.."
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${CUDA_ARCH:-sm_90}
build=$(mktemp -d)
table="$out/device-check.md"

{
  echo "# cpparity device check ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  echo
  echo '```'
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  else
    echo "nvidia-smi: not found"
  fi
  "$nvcc" --version 2>&1 | tail -1
  echo '```'
  echo
  echo "| check | result | seconds | log |"
  echo "|---|---|---|---|"
} > "$table"

failed=0
# check NAME COMMAND...: runs COMMAND, records PASS/FAIL/SKIP (exit 77) with its log.
check() {
  local name=$1
  shift
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local code=$?
  local result=PASS
  if [ $code = 77 ]; then result=SKIP; elif [ $code != 0 ]; then result="FAIL ($code)"; failed=1; fi
  echo "| $name | $result | $((SECONDS - start)) | $name.log |" >> "$table"
}

# The per-thread mask predicate (distributed/mask_predicate.h) on the device against the host.
build_gpu_mask_predicate() {
  cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. -c distributed/mask_description.c \
    -o "$build/mask_description.o" &&
    cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. -c common/error.c -o "$build/error.o" &&
    "$nvcc" -O2 -arch="$arch" -I. tests/gpu_mask_predicate.cu "$build/mask_description.o" \
      "$build/error.o" -o "$build/gpu_mask_predicate"
}
check build-gpu-mask-predicate build_gpu_mask_predicate
if [ -x "$build/gpu_mask_predicate" ]; then
  check gpu-mask-predicate "$build/gpu_mask_predicate"
fi

# The CUDA attention kernels (distributed/kernel_cuda.cu) against the CPU kernel, forward and
# backward, float32 and bf16. The C files it needs are compiled here (the registry with the CUDA
# kernels in it, as the CMake build does).
build_gpu_kernel_cuda() {
  local source objects=()
  for source in common/error.c common/fault.c distributed/mask_description.c \
    distributed/kernel_cpu.c distributed/kernel_registry.c; do
    cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -DCPPARITY_HAVE_CUDA_KERNELS -I. -c "$source" \
      -o "$build/kernel-$(basename "$source" .c).o" || return 1
    objects+=("$build/kernel-$(basename "$source" .c).o")
  done
  "$nvcc" -O2 -arch="$arch" -I. tests/gpu_kernel_cuda.cu distributed/kernel_cuda.cu \
    "${objects[@]}" -lpthread -lm -o "$build/gpu_kernel_cuda"
}
check build-gpu-kernel-cuda build_gpu_kernel_cuda
if [ -x "$build/gpu_kernel_cuda" ]; then
  check gpu-kernel-cuda "$build/gpu_kernel_cuda"
fi

cat "$table"
rm -rf "$build"
exit $failed
