#!/usr/bin/env bash
# device-bundle.sh [DIR] — prepares, here (Debian, network), what the GPU machine lacks to build
# the whole of cpparity: HDF5, libyaml and OpenBLAS with their own libraries, as Debian packages
# unpacked under DIR/root (default DIR: .device-bundle, which .gitignore leaves out of git; the
# device tool carries it when asked to). The GPU machine has the CUDA toolkit,
# CMake and PyTorch but no apt, no MPI and no HDF5 or libyaml headers, and reaches no network.
# cuBLAS and NCCL are never carried: scripts/device-check.sh finds them in the CUDA toolkit or in
# PyTorch's nvidia-* Python packages there. Criterion is not carried either: the device build
# turns the Criterion unit tests off (-DCPPARITY_UNIT_TESTS=OFF); CI runs them.
#
#   scripts/device-bundle.sh             # once, here: 17 MB of packages, 42 MB unpacked
#   then the device tool: carry [".device-bundle"], command "scripts/device-check.sh $OUT"
#
# DIR/env.sh sets what a CMake configure and the programs need to use the bundle
# (PKG_CONFIG_PATH with PKG_CONFIG_SYSROOT_DIR, HDF5_ROOT, LD_LIBRARY_PATH); device-check.sh
# sources it when DIR exists.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.device-bundle}
packages=(
  libhdf5-dev libhdf5-103-1 libsz2 libaec0        # HDF5 (C library and headers) and szip
  libyaml-0-2 libyaml-dev                          # libyaml
  libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libgfortran5 libquadmath0
)
rm -rf "$dir"
mkdir -p "$dir/debs" "$dir/root"
(cd "$dir/debs" && apt-get download "${packages[@]}")
for deb in "$dir"/debs/*.deb; do
  dpkg -x "$deb" "$dir/root"
done
# What Debian's alternatives would have linked: the OpenBLAS library under its usual names.
multiarch=usr/lib/x86_64-linux-gnu
for name in libopenblas.so.0 libopenblas.so libblas.so.3 liblapack.so.3; do
  if [ -e "$dir/root/$multiarch/openblas-pthread/$name" ]; then
    ln -sf "openblas-pthread/$name" "$dir/root/$multiarch/$name"
  fi
done
# Only shared C libraries travel (the device tool carries at most 64 MiB): no static archives, no
# Fortran or C++ bindings, no documentation.
rm -rf "$dir/debs" "$dir/root/usr/share/doc" "$dir/root/usr/share/man"
find "$dir/root" \( -name '*.a' -o -name 'liblapack*' -o -name 'libblas*' -o -name '*fortran*' -o -name '*_cpp.so*' -o -name '*hl*.so*' \) \
  -exec rm -rf {} +
cat > "$dir/env.sh" <<'ENV'
# Sourced by scripts/device-check.sh: use the carried libraries (scripts/device-bundle.sh).
bundle_root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/root
multiarch=$bundle_root/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_SYSROOT_DIR=$bundle_root
export PKG_CONFIG_PATH=/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
export HDF5_ROOT=$multiarch/hdf5/serial
export LD_LIBRARY_PATH=$multiarch:$multiarch/openblas-pthread:$multiarch/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ENV
du -sh "$dir" | sed 's/^/device-bundle: /'
