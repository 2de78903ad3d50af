#!/usr/bin/env bash
# install-dependencies.sh PACKAGE... — installs the Debian packages among PACKAGE that are
# missing, with apt-get, as root or through passwordless sudo. Prints what it does; exits 1
# with the command to run by hand when it cannot install.
set -euo pipefail

missing=()
for package in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "dependencies: all ${#} Debian packages present"
  exit 0
fi

echo "dependencies: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  run_as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  run_as_root=(sudo -n)
else
  echo "dependencies: cannot install as $(id -un) (not root, no passwordless sudo). Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${run_as_root[@]}" apt-get update -qq; then
  echo "dependencies: 'apt-get update' failed; check the network and apt sources" >&2
  exit 1
fi
if ! "${run_as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "dependencies: 'apt-get install ${missing[*]}' failed (see apt's message above)" >&2
  exit 1
fi
echo "dependencies: installed ${missing[*]}"
