#!/usr/bin/env bash
# Installs the Debian 12 packages fmha-jit builds with, when they are missing. The CUDA 13 toolkit
# (NVRTC and headers) is expected to be installed already (it is not a Debian package).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libspdlog-dev catch2 libcli11-dev
          libxxhash-dev libamdhip64-dev clang libclang-rt-14-dev python3-dev python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -e "${CUDA_HOME:-/usr/local/cuda}/include/nvrtc.h" ]; then
  echo "error: the CUDA toolkit (NVRTC headers) is not at ${CUDA_HOME:-/usr/local/cuda}" >&2
  exit 1
fi
