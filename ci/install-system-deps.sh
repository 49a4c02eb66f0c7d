#!/usr/bin/env bash
# System packages the C++ implementation (drivers/cpp) builds with: CMake, a C++17 compiler, nlohmann-json.
# Debian/Ubuntu (apt-get); run as root or with sudo. Skips what is already installed.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
[ -f /usr/include/nlohmann/json.hpp ] || need+=(nlohmann-json3-dev)
if [ ${#need[@]} -eq 0 ]; then
  echo "ci/install-system-deps.sh: cmake, g++ and nlohmann-json are present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "ci/install-system-deps.sh: installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
