#!/usr/bin/env bash
# device-bundle.sh [DIR] — prepares, here (Debian, network), what the GPU machine lacks to build
# and run the whole of cpparity: HDF5, libyaml, OpenBLAS and a pkg-config, with every shared
# library they need, as Debian packages (.deb files, about 24 MB) in DIR (default .device-bundle,
# which .gitignore leaves out of git; the device tool carries it when asked to).
#
# device-bundle.sh --unpack DIR ROOT — there: unpacks DIR's packages under ROOT (Python's standard
# library alone, no dpkg needed), links OpenBLAS under the names Debian's alternatives would, and
# writes ROOT/env.sh, which scripts/device-check.sh sources (PATH for pkg-config, PKG_CONFIG_*
# with the sysroot, HDF5_ROOT, LD_LIBRARY_PATH).
#
# The GPU machine (H200, CUDA 13 toolkit, CMake, ninja, python3 with torch, numpy and h5py) has
# no apt, no MPI, no -dev packages and no network. What it is relied on for is only the C and
# C++ runtime (RELIED_ON below): every other library a carried one needs (NEEDED entries, to the
# end of the chain: libcurl and libcrypto for HDF5, libgfortran for OpenBLAS, ...) is found here
# with dpkg and carried too, and the bundle refuses to finish if one cannot be. DIR/manifest.txt
# lists the packages and the libraries taken from the machine. cuBLAS and NCCL are never carried:
# device-check.sh finds them in the CUDA toolkit and PyTorch's nvidia-* packages there.
# Criterion is not carried either: the device build turns the unit tests off; CI runs them.
#
#   scripts/device-bundle.sh             # once, here
#   then the device tool: carry [".device-bundle"], command "scripts/device-check.sh $OUT"
set -euo pipefail
cd "$(dirname "$0")/.."

# The sonames the GPU machine provides itself: glibc and the GCC runtime, which every Linux
# image with a CUDA toolkit and PyTorch has (and which must not be replaced by older copies).
RELIED_ON='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'

# unpack DEB... into ROOT (the last argument is ROOT): the data member of each ar archive.
unpack() {
  python3 - "$@" <<'PYTHON'
import io, sys, tarfile
*debs, root = sys.argv[1:]
for deb in debs:
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            sys.exit(f"{deb}: not a Debian package (no ar header)")
        while header := f.read(60):
            name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58])
            data = f.read(size)
            f.read(size % 2)
            if name.startswith("data.tar"):
                if name.endswith(".zst"):
                    sys.exit(f"{deb}: zstd-compressed data, which Python cannot read")
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    tar.extractall(root, filter="tar" if hasattr(tarfile, "data_filter") else None)
PYTHON
}

if [ "${1:-}" = --unpack ]; then
  dir=${2:?usage: device-bundle.sh --unpack DIR ROOT}
  root=${3:?usage: device-bundle.sh --unpack DIR ROOT}
  mkdir -p "$root"
  unpack "$dir"/debs/*.deb "$root"
  multiarch=$root/usr/lib/x86_64-linux-gnu
  # what Debian's alternatives would have linked: OpenBLAS under its usual names
  for name in libopenblas.so.0 libopenblas.so libblas.so.3 liblapack.so.3; do
    if [ -e "$multiarch/openblas-pthread/$name" ]; then
      ln -sf "openblas-pthread/$name" "$multiarch/$name"
    fi
  done
  cat > "$root/env.sh" <<'ENV'
# Sourced by scripts/device-check.sh: build and run against the unpacked bundle.
bundle_root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
multiarch=$bundle_root/usr/lib/x86_64-linux-gnu
export PATH=$bundle_root/usr/bin:$PATH
export PKG_CONFIG_SYSROOT_DIR=$bundle_root
export PKG_CONFIG_PATH=/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
export HDF5_ROOT=$multiarch/hdf5/serial
export LD_LIBRARY_PATH=$multiarch:$multiarch/openblas-pthread:$multiarch/hdf5/serial${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ENV
  exit 0
fi

dir=${1:-.device-bundle}
packages=(
  libhdf5-dev libhdf5-103-1 libsz2 libaec0        # HDF5 (C library and headers) and szip
  libyaml-0-2 libyaml-dev                          # libyaml
  libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev
  pkgconf pkgconf-bin libpkgconf3                  # the pkg-config CMake's FindPkgConfig runs
)
rm -rf "$dir"
mkdir -p "$dir/debs"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
download() { (cd "$dir/debs" && apt-get download "$@" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true); }
download "${packages[@]}"

# The package installed here that holds the file PATH (dpkg records /lib or /usr/lib, whichever
# the package shipped; merged /usr makes both exist).
package_of() {
  local real candidate
  real=$(readlink -f "$1")
  for candidate in "$1" "$real" "${real#/usr}" "/usr${1#/usr}"; do
    dpkg -S "$candidate" 2>/dev/null | sed -n '1s/:.*//p' && return 0
  done
  return 0
}

# Close the set over NEEDED: unpack, list the sonames the carried ELF files need that neither the
# bundle nor RELIED_ON has, find the package that provides each here, carry it, until none is
# missing. A soname this machine cannot resolve stops the bundle.
relied=()
for round in 1 2 3 4 5 6 7 8; do
  rm -rf "$scratch/root" && mkdir -p "$scratch/root"
  unpack "$dir"/debs/*.deb "$scratch/root"
  carried=$(find "$scratch/root" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
  needed=$(find "$scratch/root" -type f \( -name '*.so*' -o -path '*/bin/*' \) \
    -exec readelf -d {} + 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
  missing=()
  for soname in $needed; do
    if grep -qxF "$soname" <<< "$carried"; then continue; fi
    if grep -qE "$RELIED_ON" <<< "$soname"; then relied+=("$soname"); continue; fi
    missing+=("$soname")
  done
  [ ${#missing[@]} = 0 ] && break
  more=()
  for soname in "${missing[@]}"; do
    path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ && !found {found = $NF} END {print found}')
    package=${path:+$(package_of "$path")}
    if [ -z "$package" ]; then
      echo "device-bundle: no package here provides $soname (needed by a carried library)" >&2
      exit 1
    fi
    more+=("$package")
  done
  echo "device-bundle: round $round carries $(printf '%s ' "${more[@]}")for $(printf '%s ' "${missing[@]}")"
  download $(printf '%s\n' "${more[@]}" | sort -u)
done
if [ ${#missing[@]} != 0 ]; then
  echo "device-bundle: the NEEDED closure did not settle in 8 rounds: ${missing[*]}" >&2
  exit 1
fi
{
  echo "# scripts/device-bundle.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ): packages carried"
  (cd "$dir/debs" && ls -1 ./*.deb | sed 's|^\./||')
  echo "# sonames taken from the GPU machine itself (the C and C++ runtime)"
  printf '%s\n' "${relied[@]}" | sort -u
} > "$dir/manifest.txt"
du -sh "$dir" | sed 's/^/device-bundle: /'
