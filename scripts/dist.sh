#!/usr/bin/env bash
# Builds what idem ships to Python and Node users, for this machine's
# platform, into dist/:
#   dist/idem_mcp-VERSION-py3-none-PLATFORM.whl   the wheel (maturin), the `idem-mcp` binary
#   dist/idem_mcp-VERSION.tar.gz                  the sdist (builds with a Rust toolchain)
#   dist/npm/idem-mcp-VERSION.tgz                 the package users name: the launcher
#   dist/npm/idem-mcp-PLATFORM-VERSION.tgz        this platform's binary
#   dist/idem-mcp                                 that binary, as the wheel holds it
# and prints the size of each and of the binary. VERSION is the workspace's
# (Cargo.toml), stamped into every package.
#
#   scripts/dist.sh                  the `dist` profile: release, fat LTO, one codegen unit, stripped
#   IDEM_DIST_PROFILE=dev scripts/dist.sh
#                                    the profile .ci/run's tests built (stripped, no LTO): the same
#                                    packages, made in a minute, to install and run in CI
#
# Needs: cargo, python3 with maturin (pip install maturin; ziglang too for
# `IDEM_DIST_ZIG=1`, which links against an older glibc for the wheel's
# manylinux tag), npm. Downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${IDEM_DIST_PROFILE:-dist}"
out="$PWD/dist"
version="$(scripts/lib/version.sh)"
rm -rf "$out" && mkdir -p "$out/npm"

# The npm platform this machine is, as the launcher
# (packaging/npm/idem-mcp/bin/idem-mcp.js) names it.
npm_platform() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) echo "dist.sh: $(uname -s): use .github/workflows/release.yml's way for it" >&2; exit 1 ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "dist.sh: no npm package for $(uname -m)" >&2; exit 1 ;;
  esac
  if [ "$os" = darwin ]; then echo "$os-$arch"
  elif ldd --version 2>&1 | grep -qi musl; then echo "$os-$arch-musl"
  else echo "$os-$arch-gnu"; fi
}

echo "== the wheel and the sdist (maturin, profile $profile)"
zig=()
if [ "${IDEM_DIST_ZIG:-0}" = 1 ]; then zig=(--zig --compatibility manylinux_2_28); fi
(cd packaging/pypi &&
  maturin build --locked --profile "$profile" --out "$out" "${zig[@]}" --quiet &&
  maturin sdist --out "$out")
wheel="$(ls "$out"/idem_mcp-"$version"-*.whl)"
# The npm package ships the wheel's own binary: the same bytes.
binary="$out/idem-mcp"
python3 - "$wheel" "$binary" <<'PY'
import shutil, sys, zipfile
wheel, binary = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    inside = [n for n in z.namelist() if n.endswith(".data/scripts/idem-mcp")]
    if len(inside) != 1:
        sys.exit(f"dist.sh: the wheel holds no idem-mcp binary: {z.namelist()}")
    with z.open(inside[0]) as src, open(binary, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
chmod +x "$binary"
if command -v auditwheel >/dev/null; then auditwheel show "$wheel" | tr '\n' ' ' | sed 's/  */ /g'; echo; fi

echo "== the npm packages"
python3 scripts/lib/npm_packages.py main "$version" "$out/npm"
python3 scripts/lib/npm_packages.py platform "$version" "$(npm_platform)" "$binary" "$out/npm"

echo "== sizes"
ls -l "$binary" "$out"/*.whl "$out"/*.tar.gz "$out"/npm/*.tgz | awk '{printf "%8.1f MiB  %s\n", $5 / 1048576, $9}'
