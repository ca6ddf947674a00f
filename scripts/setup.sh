#!/usr/bin/env bash
# setup.sh — installs the Debian 12 packages zerolab builds and tests with, if any are missing.
# Needs root (or sudo). Safe to run again: it installs nothing when everything is present.
# `setup.sh fuzz` also installs clang and its libFuzzer runtime, for the fuzz preset.
set -euo pipefail

packages=(
  build-essential cmake g++ git patch ccache
  libeigen3-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev librapidcheck-dev libbenchmark-dev time
  libopenmpi-dev openmpi-bin liburing-dev
  iproute2 kmod
  doxygen graphviz
  jupyter-nbconvert python3-matplotlib python3-nbclient python3-ipykernel python3-numpy
)
case "${1:-}" in
  "") ;;
  fuzz) packages+=(clang-14 libclang-rt-14-dev) ;;
  *) echo "setup: unknown step '$1': use no argument or 'fuzz'" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
