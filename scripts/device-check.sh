#!/usr/bin/env bash
# device-check.sh OUT — everything that needs a GPU, in one call of a few minutes on the GPU
# machine (an H200 with the CUDA 13 toolkit, CMake, ninja and PyTorch, but no apt, no MPI, no
# HDF5, libyaml or Criterion, and no network). Writes OUT/device-check.md (the summary table,
# also printed last), OUT/logs.tar.gz (every step's log), OUT/bench-ours.jsonl and
# OUT/bench-torch.jsonl (the attention benchmark) and OUT/device-suite.h5 (a results file).
# Exit 0 when every check passed.
#
# Prepare on the development machine, once (what the GPU machine lacks travels with the tree):
#   scripts/device-bundle.sh                       # HDF5, libyaml, OpenBLAS as .debs, unpacked
# then run through the device tool: carry [".device-bundle"], command
#   scripts/device-check.sh $OUT                   (timeout_s 480)
# cuBLAS comes from the CUDA toolkit there, NCCL from PyTorch's nvidia-nccl package: never
# carried. Without .device-bundle only the nvcc-built checks run (the first two rows).
#
# Checks, in order (each row: PASS, FAIL (exit code) or SKIP, seconds, log):
#   gpu-mask-predicate      the shared per-thread mask logic on the device equals the host's
#   gpu-kernel-cuda         cuda-f32 and cuda-bf16 forward and backward against the CPU kernel
#   build-cpparity          the whole cpparity with CMake against the bundle (unit tests off)
#   gpu-ctests              ctest -L gpu: kernels, the cuda implementation against the cpu one
#                           at cp 1 and 2, the nccl communicator with one rank
#   device-suite-local-8    cases/device.yaml --device cuda, cp 1, 2, 4, 8 on 8 local ranks
#                           sharing the GPU, f32 and bf16, against the float64 reference
#   ci-suite-local-4        cases/ci.yaml --device cuda, cp 1, 2, 4 on 4 local ranks
#   selftest-cuda           cpparity selftest cases/ci.yaml --device cuda on 4 local ranks: every
#                           fault planted in the cuda implementation (model_cuda_faults.cu; not
#                           the built-in CPU kernel's) caught by >= 2 cases, no false alarm
#   kernels-suite-cuda      cases/kernels.yaml (attention-level) with cuda-f32, staged from host
#                           buffers (kernel_device_staging.h), against the float64 reference
#   nccl-one-rank           cases/device.yaml --device cuda --comm nccl (cp 1 items)
#   determinism             one case twice (--store all): every tensor bit-identical
#   cp-step-times           implementation and reference seconds of one case at cp 1 and 4
#   bench-attention         cuda-bf16 vs PyTorch (SDPA causal, flex_attention otherwise), B = 1,
#                           H = 16, Dh = 128, S 4096 and 16384, causal / sliding 1024 / chunked
#                           2048 / 16 packed documents: TFLOP/s on allowed pairs and the ratio
set -uo pipefail
out=${1:?usage: scripts/device-check.sh OUT_DIRECTORY}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${CUDA_ARCH:-sm_90}
build=$(mktemp -d)
logs=$(mktemp -d)
table="$out/device-check.md"
jobs=$(nproc 2>/dev/null || echo 8)

{
  echo "# cpparity device check ($(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
  echo
  echo '```'
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  else
    echo "nvidia-smi: not found"
  fi
  "$nvcc" --version 2>&1 | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
  echo '```'
  echo
  echo "| check | result | seconds | log |"
  echo "|---|---|---|---|"
} > "$table"

failed=0
# check NAME LIMIT COMMAND...: runs COMMAND (a program or a function of this script, which are
# exported) for at most LIMIT seconds, records PASS, FAIL or SKIP (exit 77) with its log.
check() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" bash -c '"$@"' "$name" "$@" > "$logs/$name.log" 2>&1
  local code=$?
  local result=PASS
  if [ $code = 77 ]; then result=SKIP; elif [ $code = 124 ]; then result="FAIL (timeout ${limit} s)"; failed=1;
  elif [ $code != 0 ]; then result="FAIL ($code)"; failed=1; fi
  echo "| $name | $result | $((SECONDS - start)) | $name.log |" >> "$table"
  return $code
}

# --- nvcc alone: the per-thread mask logic and the attention kernels --------------------------
export out build nvcc arch jobs
export cflags="-std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I."
build_gpu_mask_predicate() {
  cc $cflags -c distributed/mask_description.c -o "$build/mask_description.o" &&
    cc $cflags -c common/error.c -o "$build/error.o" &&
    "$nvcc" -O2 -arch="$arch" -I. tests/gpu_mask_predicate.cu "$build/mask_description.o" \
      "$build/error.o" -o "$build/gpu_mask_predicate"
}
build_gpu_kernel_cuda() {
  local source objects=()
  for source in common/error.c common/fault.c distributed/mask_description.c \
    distributed/kernel_cpu.c distributed/kernel_registry.c; do
    cc $cflags -DCPPARITY_HAVE_CUDA_KERNELS -c "$source" \
      -o "$build/kernel-$(basename "$source" .c).o" || return 1
    objects+=("$build/kernel-$(basename "$source" .c).o")
  done
  "$nvcc" -O2 -arch="$arch" -I. tests/gpu_kernel_cuda.cu distributed/kernel_cuda.cu \
    "${objects[@]}" -lpthread -lm -o "$build/gpu_kernel_cuda"
}
export -f build_gpu_mask_predicate build_gpu_kernel_cuda
check build-gpu-mask-predicate 120 build_gpu_mask_predicate &&
  check gpu-mask-predicate 60 "$build/gpu_mask_predicate"
check build-gpu-kernel-cuda 180 build_gpu_kernel_cuda &&
  check gpu-kernel-cuda 180 "$build/gpu_kernel_cuda"

# --- the whole cpparity against the carried libraries ------------------------------------------
if [ -f .device-bundle/env.sh ]; then
  # shellcheck disable=SC1091
  source .device-bundle/env.sh
  nccl_root=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.dirname(n.__file__))' 2>/dev/null || true)
  [ -n "$nccl_root" ] && export LD_LIBRARY_PATH=$nccl_root/lib:$LD_LIBRARY_PATH
  export device_build=build-device nccl_root
  configure_and_build() {
    cmake -S . -B "$device_build" -DCMAKE_BUILD_TYPE=Release -DCPPARITY_UNIT_TESTS=OFF \
      -DCPPARITY_SANITIZED_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
      ${nccl_root:+-DNCCL_ROOT=$nccl_root} $(command -v ninja >/dev/null && echo -GNinja) &&
      cmake --build "$device_build" -j "$jobs" --target cpparity cpparity-bench-attention \
        gpu_mask_predicate gpu_kernel_cuda gpu_implementation_cuda &&
      { cmake --build "$device_build" -j "$jobs" --target gpu_comm_nccl || true; }
  }
  export -f configure_and_build
  if check build-cpparity 240 configure_and_build; then
    export cpparity=$device_build/cpparity
    check gpu-ctests 240 ctest --test-dir "$device_build" -L gpu --output-on-failure
    rm -f "$out/device-suite.h5" "$build"/*.h5
    check device-suite-local-8 240 "$cpparity" run cases/device.yaml --device cuda \
      --comm local --ranks 8 --out "$out/device-suite.h5"
    check ci-suite-local-4 240 "$cpparity" run cases/ci.yaml --device cuda --comm local \
      --ranks 4 --reference-cache "$build/reference-cache" --out "$build/ci.h5"
    check selftest-cuda 240 "$cpparity" selftest cases/ci.yaml --device cuda --comm local \
      --ranks 4 --reference-cache "$build/reference-cache" --out "$build/selftest.h5"
    check kernels-suite-cuda 120 "$cpparity" run cases/kernels.yaml --device cuda --comm local \
      --allow-not-run --out "$build/kernels.h5"
    check nccl-one-rank 120 "$cpparity" run cases/device.yaml --device cuda --comm nccl \
      --allow-not-run --out "$build/nccl.h5"
    twice() {
      for run in 1 2; do
        "$cpparity" run cases/device.yaml --case full-and-sliding-padding-both-sides \
          --device cuda --comm local --ranks 8 --store all --out "$build/same-$run.h5" || return 1
      done
      python3 tests/compare_runs_bitwise.py "$build/same-1.h5" "$build/same-2.h5"
    }
    export -f twice
    check determinism 180 twice
    step_times() {
      python3 - "$out/device-suite.h5" <<'PYTHON'
import sys, h5py
with h5py.File(sys.argv[1], "r") as results:
    for case in results["cases"]:
        for dtype in results["cases"][case]:
            group = results["cases"][case][dtype]
            if not hasattr(group, "keys"):
                continue
            for item in ("cp_1", "cp_4"):
                if item in group:
                    a = group[item].attrs
                    print(f"{case} {dtype} {item}: implementation {a['seconds']:.3f} s, "
                          f"reference {a['reference_seconds']:.3f} s, {a['outcome'].decode()}")
PYTHON
    }
    export -f step_times
    check cp-step-times 60 step_times
    bench() {
      local seq mask
      : > "$out/bench-ours.jsonl"
      for seq in 4096 16384; do
        for mask in causal sliding chunked packed; do
          "$device_build/cpparity-bench-attention" --kernel cuda-bf16 --seq-len "$seq" \
            --heads 16 --head-dim 128 --mask "$mask" --window 1024 --chunk 2048 \
            --documents 16 --repeats 5 >> "$out/bench-ours.jsonl" || return 1
        done
      done
      python3 harness/bench/torch_attention.py --ours "$out/bench-ours.jsonl" \
        --seq-lens 4096,16384 --json "$out/bench-torch.jsonl"
    }
    export -f bench
    check bench-attention 300 bench
  fi
else
  echo "| build-cpparity | SKIP | 0 | no .device-bundle: run scripts/device-bundle.sh and carry it |" >> "$table"
fi

# the timings and the step times belong in the summary too
for name in cp-step-times bench-attention; do
  if [ -s "$logs/$name.log" ]; then
    { echo; echo "## $name"; echo '```'; tail -40 "$logs/$name.log"; echo '```'; } >> "$table"
  fi
done
tar -czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null
cat "$table"
rm -rf "$build" "$logs"
exit $failed
