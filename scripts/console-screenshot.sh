#!/usr/bin/env bash
# Takes docs/console.png anew: the page of `idem console` as the browser
# test of cli/tests/console.rs sees it (headless Chromium, 1100x900), with
# operations awaiting approval and an unknown outcome on it.
#
# Needs what that test needs: chromium, chromium-driver, python3 -m pip
# install selenium (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
IDEM_CONSOLE_SCREENSHOT="$PWD/docs/console.png" \
  cargo test -p idem-cli --test console -- a_person_decides_in_a_real_browser --exact
echo "docs/console.png taken"
