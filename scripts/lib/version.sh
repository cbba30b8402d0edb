#!/usr/bin/env bash
# Prints the workspace's version (Cargo.toml's [workspace.package]), the
# one version of every crate and of the idem-mcp packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "idem-cli"))'
