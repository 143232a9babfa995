#!/usr/bin/env bash
# Installs the Debian 12 packages this project needs to build, test and benchmark.
# Fast when everything is present already: it asks dpkg first and runs apt-get only
# for what is missing. Needs root (or sudo) only when something must be installed.
set -euo pipefail

packages=(
  g++ cmake ninja-build make pkg-config
  libyaml-cpp-dev nlohmann-json3-dev libcurl4-openssl-dev libssl-dev
  libcli11-dev libfmt-dev libcpp-httplib-dev zlib1g-dev libboost-dev libsimdjson-dev libre2-dev ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev libpq-dev postgresql-15
  clang-format python3 time ca-certificates wrk
  clang libclang-rt-dev
  python3-dev pybind11-dev python3-pytest mypy python3-pip python3-venv python3-setuptools
  python3-wheel
  chromium fonts-dejavu-core
)
# The real kubectl, which tests point at the fleet's Kubernetes API (/usr/bin/kubectl): the
# machine's own when it has one (the Google Cloud SDK's package), else Debian's
# kubernetes-client (v1.20, enough for the reads the tests make). gcloud has no Debian
# package: the tests that drive the real gcloud say they are skipped without it.
if [[ ! -x /usr/bin/kubectl ]]; then
  packages+=(kubernetes-client)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
