#!/usr/bin/env bash
# Installs what is missing, builds everything (the end-to-end tests run the built `ledger`),
# and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/deps.sh
swift build --build-tests
swift test --skip-build "$@"
