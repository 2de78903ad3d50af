#!/usr/bin/env bash
# device-check.sh [--no-gpu-ok] [--budget SECONDS] OUT — everything that needs a GPU, in one call
# of a few minutes on the GPU machine (an H200 with the CUDA 13 toolkit, CMake, ninja and
# python3 with torch, numpy and h5py, but no apt, no MPI, no -dev packages and no network).
#
# Prepare on the development machine, once (what the GPU machine lacks travels with the tree):
#   scripts/device-bundle.sh                 # HDF5, libyaml, OpenBLAS, pkg-config as .debs
# then run through the device tool: carry [".device-bundle"], command
#   scripts/device-check.sh $OUT             (timeout_s 480; the default budget is 450 s)
# cuBLAS comes from the CUDA toolkit there, NCCL from PyTorch's nvidia-nccl package: never
# carried. Without .device-bundle only the probes (the first four rows) can run.
#
# OUT receives at most five files, written as the checks go, so that a run cut short still
# returns what it did: device-check.md (the table, also printed last), device-check.log (every
# check's output, appended as it comes), device-suite.h5 (a results file), bench-ours.jsonl and
# bench-torch.jsonl (the attention benchmark).
#
# Each row is a build row (runs anywhere nvcc is) or a device row (needs a CUDA device: SKIP,
# with the reason, where there is none), and ends PASS, FAIL (exit code or timeout) or SKIP (the
# reason). The checks share one budget: each gets the time left times its weight over the weights
# of the checks still to come, so a check that finishes early leaves its time to the others, and
# the whole run ends inside the budget. Exit 0 when no row FAILED.
#
# --no-gpu-ok (CI, tests/CMakeLists.txt's device-script test): every build row must PASS and
# every device row must SKIP with its reason; anything else fails the run.
#
# Rows, in order (kind, weight):
#   build-gpu-mask-predicate build  60  the probes alone (CPPARITY_DEVICE_PROBES_ONLY: the CMake
#                                       targets of the kernels, nvcc and the C library only)
#   gpu-mask-predicate       device 20  the shared per-thread mask logic on the device = the host's
#   build-gpu-kernel-cuda    build  90  the CUDA kernels' probe
#   gpu-kernel-cuda          device 60  cuda-f32 and cuda-bf16 against the CPU kernel; masked
#                                       values (Inf, NaN) kept out of every output
#   build-cpparity           build 240  the bundle unpacked, the whole cpparity with CMake against it
#   libraries-resolved       build   5  every library cpparity needs is found; which come from
#                                       the machine rather than the bundle
#   gpu-ctests               device 90  ctest -L gpu: kernels, the cuda implementation against the
#                                       cpu one at cp 1 and 2 (ring too) and hybrid 2x2 at cp 4,
#                                       the nccl communicator with one rank
#   device-suite-local-8     device 60  cases/device.yaml --device cuda, cp 1, 2, 4, 8 on 8 local
#                                       ranks sharing the GPU, f32 and bf16; one case also under
#                                       the zigzag layout, ring attention and hybrids
#   ci-suite-local-4         device 60  cases/ci.yaml --device cuda --algorithm ulysses, cp 1, 2, 4
#                                       on 4 local ranks, every layout (zigzag and round-robin
#                                       through the kernel's block calls)
#   ring-suite-local-4       device 60  cases/ci.yaml --device cuda --algorithm ring: ring
#                                       attention on every layout at cp 2 and 4
#   hybrid-suite-local-4     device 40  cases/ci.yaml --device cuda --algorithm hybrid: hybrid 2x2
#                                       (Ulysses pairs split from 4 local ranks, ring across)
#   selftest-cuda            device 90  every fault planted in the cuda implementation caught by
#                                       >= 2 cases, no false alarm (Ulysses items)
#   selftest-cuda-ring       device 60  the ring faults planted on the GPU (ring items)
#   selftest-cuda-hybrid     device 40  hybrid-group-across-ring, the ring's and the all-to-all's
#                                       faults planted on the GPU (hybrid items)
#   kernels-suite-cuda       device 40  cases/kernels.yaml (attention-level) with cuda-f32, its
#                                       whole-sequence and block calls (ABI 3, staged)
#   nccl-one-rank            device 30  cases/device.yaml --device cuda --comm nccl (cp 1 items)
#   determinism              device 60  one case twice (--store all): every tensor bit-identical
#   cp-step-times            device 10  implementation and reference seconds at cp 1 and 4
#   cp-ring-vs-ulysses       device 90  bench/cp_layouts.py on the GPU: causal S = 16384 at cp 4,
#                                       Ulysses and ring, contiguous and zigzag, seconds per step
#   bench-attention          device 120 cuda-bf16 vs PyTorch (SDPA causal, flex_attention else,
#                                       its compile included), TFLOP/s on allowed pairs and ratio
set -uo pipefail
usage="usage: scripts/device-check.sh [--no-gpu-ok] [--budget SECONDS] OUT_DIRECTORY"
no_gpu_ok=0
budget=450
while [ $# -gt 0 ]; do
  case $1 in
    --no-gpu-ok) no_gpu_ok=1; shift ;;
    --budget) budget=${2:?$usage}; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    -*) echo "device-check: unknown option $1; $usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
out=${1:?$usage}
case $budget in ''|*[!0-9]*) echo "device-check: --budget takes whole seconds, not '$budget'" >&2; exit 2 ;; esac
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
cd "$(dirname "$0")/.." || exit 2
deadline=$((SECONDS + budget))
nvcc=${NVCC:-$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })}
arch=${CUDA_ARCH:-90}
jobs=$(nproc 2>/dev/null || echo 8)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
table=$out/device-check.md
log=$out/device-check.log
device_build=build-device
machine_library_path=${LD_LIBRARY_PATH:-} # python3 runs with the machine's own libraries
rm -f "$table" "$log" "$out/device-suite.h5" "$out/bench-ours.jsonl" "$out/bench-torch.jsonl"

# Is there a CUDA device? Decided once; every device row skips with this reason when not.
no_device=""
if ! command -v nvidia-smi > /dev/null; then
  no_device="no CUDA device: nvidia-smi not found (no NVIDIA driver here)"
elif ! nvidia-smi -L 2>&1 | grep -q '^GPU '; then
  no_device="no CUDA device: nvidia-smi lists none ($(nvidia-smi -L 2>&1 | head -1))"
fi

{
  echo "# cpparity device check ($(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${budget} s)"
  echo
  echo '```'
  if [ -z "$no_device" ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  else
    echo "$no_device"
  fi
  if [ -n "$nvcc" ]; then "$nvcc" --version 2>&1 | tail -1; else echo "nvcc: not found"; fi
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
  echo '```'
  echo
  echo "| check | kind | result | seconds | limit | note |"
  echo "|---|---|---|---|---|---|"
} > "$table"

# The rows: name, kind, weight. Device rows weigh nothing where no device is (they skip).
rows=(
  "build-gpu-mask-predicate build 60" "gpu-mask-predicate device 20"
  "build-gpu-kernel-cuda build 90" "gpu-kernel-cuda device 60"
  "build-cpparity build 240" "libraries-resolved build 5"
  "gpu-ctests device 90" "device-suite-local-8 device 60" "ci-suite-local-4 device 60"
  "ring-suite-local-4 device 60" "hybrid-suite-local-4 device 40" "selftest-cuda device 90"
  "selftest-cuda-ring device 60" "selftest-cuda-hybrid device 40"
  "kernels-suite-cuda device 40" "python-kernel-sdpa-cuda device 20"
  "python-kernel-flex-cuda device 90" "python-kernel-flash-attn device 5"
  "nccl-one-rank device 30" "determinism device 60"
  "cp-step-times device 10" "cp-ring-vs-ulysses device 90" "bench-attention device 120"
)
declare -A kind_of weight_of result_of
pending=0
for row in "${rows[@]}"; do
  read -r name kind weight <<< "$row"
  kind_of[$name]=$kind
  weight_of[$name]=$weight
  if [ "$kind" = build ] || [ -z "$no_device" ]; then pending=$((pending + weight)); fi
done

record() { # NAME RESULT SECONDS LIMIT NOTE
  result_of[$1]=$2
  echo "| $1 | ${kind_of[$1]} | $2 | $3 | $4 | $5 |" >> "$table"
}
settle() { # NAME: its weight no longer waits for time
  if [ "${kind_of[$1]}" = build ] || [ -z "$no_device" ]; then
    pending=$((pending - ${weight_of[$1]}))
  fi
}
skip() { # NAME REASON
  settle "$1"
  record "$1" SKIP 0 - "$2"
  echo "===== $1: SKIP ($2)" >> "$log"
}

# check NAME COMMAND...: runs COMMAND (a program or an exported function of this script) within
# its share of the budget, its output appended to the log as it comes; records the row.
check() {
  local name=$1
  shift
  if [ "${kind_of[$name]}" = device ] && [ -n "$no_device" ]; then
    skip "$name" "$no_device"
    return 1
  fi
  local left=$((deadline - SECONDS))
  local limit=$((left * ${weight_of[$name]} / (pending > 0 ? pending : 1)))
  settle "$name"
  if [ "$limit" -lt 5 ]; then
    record "$name" SKIP 0 "$limit" "budget spent (${left} s left of ${budget} s)"
    return 1
  fi
  echo "===== $name (limit ${limit} s) =====" >> "$log"
  local start=$SECONDS
  timeout --kill-after=5 "$limit" bash -c '"$@"' "$name" "$@" >> "$log" 2>&1
  local code=$? result=PASS note=""
  if [ $code = 124 ] || [ $code = 137 ]; then result=FAIL note="timed out after ${limit} s"
  elif [ $code = 77 ]; then result=SKIP note="the check skipped itself (see the log)"
  elif [ $code != 0 ]; then result=FAIL note="exit $code (see the log)"; fi
  echo "===== $name: $result${note:+ ($note)} in $((SECONDS - start)) s" >> "$log"
  record "$name" "$result" $((SECONDS - start)) "$limit" "$note"
  [ "$result" = PASS ]
}
after() { # NAME NEEDED: skips NAME (true) unless NEEDED passed
  [ "${result_of[$2]:-}" = PASS ] && return 1
  skip "$1" "needs $2, which did not pass"
  return 0
}

# --- the probes: the kernels' CMake targets with nvcc and the C library only ------------------
export nvcc arch jobs work device_build out machine_library_path
generator=$(command -v ninja > /dev/null && echo -GNinja)
export generator
configure_probes() {
  [ -f "$work/probes/CMakeCache.txt" ] ||
    cmake -S . -B "$work/probes" $generator -DCPPARITY_DEVICE_PROBES_ONLY=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=Release
}
build_probe() { configure_probes && cmake --build "$work/probes" -j "$jobs" --target "$1"; }
export -f configure_probes build_probe
if [ -z "$nvcc" ]; then
  for name in build-gpu-mask-predicate build-gpu-kernel-cuda build-cpparity; do
    settle "$name"
    record "$name" FAIL 0 - "no nvcc (on PATH, at /usr/local/cuda/bin, or NVCC=)"
  done
  for name in gpu-mask-predicate gpu-kernel-cuda libraries-resolved gpu-ctests device-suite-local-8 \
    ci-suite-local-4 ring-suite-local-4 hybrid-suite-local-4 selftest-cuda selftest-cuda-ring \
    selftest-cuda-hybrid kernels-suite-cuda python-kernel-sdpa-cuda python-kernel-flex-cuda \
    python-kernel-flash-attn \
    nccl-one-rank determinism cp-step-times cp-ring-vs-ulysses bench-attention; do
    skip "$name" "needs nvcc"
  done
else
  check build-gpu-mask-predicate build_probe gpu_mask_predicate
  after gpu-mask-predicate build-gpu-mask-predicate ||
    check gpu-mask-predicate "$work/probes/tests/gpu_mask_predicate"
  check build-gpu-kernel-cuda build_probe gpu_kernel_cuda
  after gpu-kernel-cuda build-gpu-kernel-cuda ||
    check gpu-kernel-cuda "$work/probes/tests/gpu_kernel_cuda"

  # --- the whole cpparity against the carried libraries ----------------------------------------
  nccl_root=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
  export nccl_root
  build_cpparity() {
    scripts/device-bundle.sh --unpack .device-bundle "$work/bundle" &&
      source "$work/bundle/env.sh" &&
      cmake -S . -B "$device_build" $generator -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DCPPARITY_UNIT_TESTS=OFF -DCPPARITY_SANITIZED_TESTS=OFF \
        ${nccl_root:+-DNCCL_ROOT=$nccl_root} &&
      cmake --build "$device_build" -j "$jobs" --target cpparity cpparity-bench-attention \
        gpu_mask_predicate gpu_kernel_cuda gpu_implementation_cuda &&
      { ! grep -q '^NCCL_LIBRARY:FILEPATH=/' "$device_build/CMakeCache.txt" ||
        cmake --build "$device_build" -j "$jobs" --target gpu_comm_nccl; }
  }
  libraries_resolved() {
    local listing
    listing=$(ldd "$device_build/cpparity") || return 1
    echo "$listing"
    echo "from the machine, not the bundle:"
    grep '=> /' <<< "$listing" | grep -v "$work/bundle" | sed 's/^/  /'
    ! grep -q 'not found' <<< "$listing"
  }
  export -f build_cpparity libraries_resolved
  if [ -d .device-bundle/debs ]; then
    check build-cpparity build_cpparity
  elif [ $no_gpu_ok = 1 ]; then
    settle build-cpparity
    record build-cpparity FAIL 0 - "no .device-bundle: run scripts/device-bundle.sh first"
  else
    skip build-cpparity "no .device-bundle: run scripts/device-bundle.sh here and carry it"
  fi
  if [ -f "$work/bundle/env.sh" ]; then
    # shellcheck disable=SC1091
    source "$work/bundle/env.sh"
    [ -n "$nccl_root" ] && export LD_LIBRARY_PATH=$nccl_root/lib:$LD_LIBRARY_PATH
  fi
  export cpparity=$device_build/cpparity
  after libraries-resolved build-cpparity || check libraries-resolved libraries_resolved
  after gpu-ctests build-cpparity ||
    check gpu-ctests ctest --test-dir "$device_build" -L gpu --output-on-failure
  after device-suite-local-8 build-cpparity ||
    check device-suite-local-8 "$cpparity" run cases/device.yaml --device cuda --comm local \
      --ranks 8 --out "$out/device-suite.h5"
  after ci-suite-local-4 build-cpparity ||
    check ci-suite-local-4 "$cpparity" run cases/ci.yaml --device cuda --algorithm ulysses \
      --comm local --ranks 4 \
      --reference-cache "$work/reference-cache" --out "$work/ci.h5"
  after ring-suite-local-4 build-cpparity ||
    check ring-suite-local-4 "$cpparity" run cases/ci.yaml --device cuda --algorithm ring \
      --comm local --ranks 4 \
      --reference-cache "$work/reference-cache" --out "$work/ring.h5"
  after hybrid-suite-local-4 build-cpparity ||
    check hybrid-suite-local-4 "$cpparity" run cases/ci.yaml --device cuda --algorithm hybrid \
      --comm local --ranks 4 \
      --reference-cache "$work/reference-cache" --out "$work/hybrid.h5"
  after selftest-cuda build-cpparity ||
    check selftest-cuda "$cpparity" selftest cases/ci.yaml --device cuda --algorithm ulysses \
      --comm local --ranks 4 \
      --reference-cache "$work/reference-cache" --out "$work/selftest.h5"
  after selftest-cuda-ring build-cpparity ||
    check selftest-cuda-ring "$cpparity" selftest cases/ci.yaml --device cuda --algorithm ring \
      --comm local --ranks 4 --fault ring-merge-max --fault ring-merge-step-lse \
      --fault ring-last-step --fault ring-causal-skip --fault ring-dkv-direction \
      --fault zigzag-chunk-swap \
      --reference-cache "$work/reference-cache" --out "$work/selftest-ring.h5"
  # ring-dkv-direction is left out: around hybrid 2x2's ring of two, both directions are one
  after selftest-cuda-hybrid build-cpparity ||
    check selftest-cuda-hybrid "$cpparity" selftest cases/ci.yaml --device cuda \
      --algorithm hybrid --comm local --ranks 4 --fault hybrid-group-across-ring \
      --fault ring-merge-max --fault ring-merge-step-lse --fault ring-last-step \
      --fault ring-causal-skip --fault a2a-head-order --fault gqa-kv-mapping \
      --reference-cache "$work/reference-cache" --out "$work/selftest-hybrid.h5"
  after kernels-suite-cuda build-cpparity ||
    check kernels-suite-cuda "$cpparity" run cases/kernels.yaml --device cuda --comm local \
      --allow-not-run --out "$work/kernels.h5"
  # Python kernels through a kernel dump (docs/dump-format.md, "The kernel dump"): SDPA's math
  # backend and compiled flex_attention (its Triton kernels) on CUDA, judged against the float64
  # reference on a subset of cases/kernels.yaml (compiling flex for each shape is the cost)
  python_kernel() { # SCRIPT: exports the cases, runs SCRIPT on CUDA, judges its dump
    local dir=$work/python-kernel-${1%.py}
    rm -rf "$dir" && mkdir -p "$dir" &&
      "$cpparity" export cases/kernels.yaml --case prime-length-37 --case all-padding-row \
        --case head-dim-128 --case multi-query --case every-mask-on-a-mixed-batch \
        --case block-edges-crossed -o "$dir/export.h5" &&
      LD_LIBRARY_PATH=$machine_library_path python3 "examples/python-kernel/$1" \
        "$dir/export.h5" -o "$dir/dump.h5" --device cuda &&
      "$cpparity" judge "$dir/export.h5" "$dir/dump.h5" --out "$dir/judged.h5"
  }
  export -f python_kernel
  after python-kernel-sdpa-cuda build-cpparity ||
    check python-kernel-sdpa-cuda python_kernel sdpa_math.py
  after python-kernel-flex-cuda build-cpparity ||
    check python-kernel-flex-cuda python_kernel flex_attention.py
  # FlashAttention computes in fp16/bf16 only, and attention-level items judge float32 kernels
  # in this version (harness/running/attention_item.h): said, not run, until they judge bf16
  if [ -n "$no_device" ]; then
    skip python-kernel-flash-attn "$no_device"
  elif ! LD_LIBRARY_PATH=$machine_library_path python3 -c 'import flash_attn' > /dev/null 2>&1; then
    skip python-kernel-flash-attn "flash_attn is not installed here (no network to pip install it)"
  else
    skip python-kernel-flash-attn "flash_attn computes in fp16/bf16 only; attention-level items judge float32 kernels in this version"
  fi
  after nccl-one-rank build-cpparity ||
    check nccl-one-rank "$cpparity" run cases/device.yaml --device cuda --comm nccl \
      --allow-not-run --out "$work/nccl.h5"
  twice() {
    for run in 1 2; do
      "$cpparity" run cases/device.yaml --case full-and-sliding-padding-both-sides \
        --device cuda --comm local --ranks 8 --store all --out "$work/same-$run.h5" || return 1
    done
    LD_LIBRARY_PATH=$machine_library_path python3 tests/compare_runs_bitwise.py \
      "$work/same-1.h5" "$work/same-2.h5"
  }
  step_times() {
    LD_LIBRARY_PATH=$machine_library_path python3 - "$out/device-suite.h5" <<'PYTHON'
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
    LD_LIBRARY_PATH=$machine_library_path python3 harness/bench/torch_attention.py \
      --ours "$out/bench-ours.jsonl" --seq-lens 4096,16384 --json "$out/bench-torch.jsonl"
  }
  ring_vs_ulysses() {
    LD_LIBRARY_PATH=$machine_library_path python3 bench/cp_layouts.py "$cpparity" 4 \
      --suite bench/cp-layouts-16k.yaml --device cuda
  }
  export -f twice step_times bench ring_vs_ulysses
  after determinism build-cpparity || check determinism twice
  after cp-step-times device-suite-local-8 || check cp-step-times step_times
  after cp-ring-vs-ulysses build-cpparity || check cp-ring-vs-ulysses ring_vs_ulysses
  after bench-attention build-cpparity || check bench-attention bench
fi

# the step times and the benchmark belong in the summary too
for name in cp-step-times cp-ring-vs-ulysses bench-attention; do
  if [ "${result_of[$name]:-}" = PASS ] || [ "${result_of[$name]:-}" = FAIL ]; then
    { echo; echo "## $name"; echo '```'
      sed -n "/^===== $name (limit/,/^===== $name:/p" "$log" | tail -40; echo '```'; } >> "$table"
  fi
done

failed=0
for row in "${rows[@]}"; do
  read -r name kind _ <<< "$row"
  result=${result_of[$name]:-MISSING}
  if [ "$result" = FAIL ] || [ "$result" = MISSING ]; then failed=1; fi
  if [ $no_gpu_ok = 1 ]; then
    if [ "$kind" = build ] && [ "$result" != PASS ]; then
      echo "device-check: --no-gpu-ok: build row $name is $result, not PASS" >> "$table"; failed=1
    elif [ "$kind" = device ] && [ "$result" != SKIP ]; then
      echo "device-check: --no-gpu-ok: device row $name is $result, not SKIP" >> "$table"; failed=1
    fi
  fi
done
{ echo; echo "device-check: $([ $failed = 0 ] && echo passed || echo FAILED) in $SECONDS s of a ${budget} s budget"; } >> "$table"
cat "$table"
exit $failed
