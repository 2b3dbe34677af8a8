#!/usr/bin/env bash
# deps.sh: installs the Debian packages the project needs, or says what to run.
set -euo pipefail
packages=(luajit libluajit-5.1-dev libopenblas-dev libcjson-dev libsleef-dev zlib1g-dev lua-busted lua-check lua-argparse libreadline8 make gcc pkg-config
          libopenmpi-dev openmpi-bin  # OpenMPI: tensordict.dist (docs/dist.md)
          libhdf5-dev  # HDF5: T.from_h5, td:to_h5, H5Source / H5Sink (docs/h5.md)
          gnuplot-nox  # PNG charts: tdflow inspect --hist --plot, tdflow report --png (docs/recipes.md)
          luarocks)                   # the install spec builds the rock (docs/building.md)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "tensordict: missing Debian packages: ${missing[*]}" >&2
  echo "run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "tensordict: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
