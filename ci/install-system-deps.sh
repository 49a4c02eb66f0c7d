#!/usr/bin/env bash
# System packages from Debian: what the C++ implementation (drivers/cpp) builds with (CMake, a C++17 compiler,
# nlohmann-json), and the headless browser the HTML report's test drives (chromium with its chromedriver,
# tests/harness/test_html_report_browser.py). Debian/Ubuntu (apt-get); run as root or with sudo. Skips what is
# already installed.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
[ -f /usr/include/nlohmann/json.hpp ] || need+=(nlohmann-json3-dev)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if [ ${#need[@]} -eq 0 ]; then
  echo "ci/install-system-deps.sh: cmake, g++, nlohmann-json, chromium and chromedriver are present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "ci/install-system-deps.sh: installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
