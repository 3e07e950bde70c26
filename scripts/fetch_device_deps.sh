#!/usr/bin/env bash
# Run here (with internet): download the .debs the GPU machine lacks (cmocka)
# into .deb/ (git-ignored) so scripts/gpu_check.sh can unpack them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deb
cd .deb
apt-get download libcmocka0 libcmocka-dev
ls -l
