#!/usr/bin/env bash
# Installs what scripts/dist.sh wrote into dist/ as a user would, with no
# Rust toolchain on PATH: the wheel into a fresh virtual environment (pip,
# from the file alone), the npm tarballs into a fresh folder (npm, with
# --ignore-scripts); then runs each installed `idem-mcp` as an MCP client
# would: its version must be the workspace's, and `idem-mcp gateway` in
# front of the Python ledger server of cli/tests/gateway.rs
# (cli/tests/upstream/ledger.py, driven by cli/tests/upstream/client.py
# with the official MCP Python SDK) must run a write called twice once.
# The npm launcher, a process between the client and the binary, must
# pass a client's SIGTERM on (the gateway and its upstream end with it)
# and a failure's exit code and message unchanged; npx must find it by
# name; without its platform's package it must say so, and how else to
# run it.
#
#   scripts/try-packages.sh    after scripts/dist.sh; .ci/run runs both
#
# Needs python3 with the `mcp` package (the client and the server), node
# and npm. Exits non-zero, saying what failed, on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(scripts/lib/version.sh)"
python="$(python3 -c 'import sys; print(sys.executable)')"
here="$(mktemp -d)"
trap 'rm -rf "$here"' EXIT

# A PATH a Python or Node user has: the interpreters and the system's
# tools, no cargo, no rustc.
user_path="$(dirname "$python"):$(dirname "$(command -v node)"):/usr/bin:/bin"
if PATH="$user_path" command -v cargo >/dev/null || PATH="$user_path" command -v rustc >/dev/null; then
  echo "try-packages.sh: a Rust toolchain is on the user's PATH ($user_path)" >&2
  exit 1
fi
as_user() { env -i HOME="$here" PATH="$user_path" "$@"; }

# Whether a process whose command line holds $1 runs, for up to 30 s
# until it is as $2 says (`running` or `gone`).
until_it_is() {
  for _ in $(seq 300); do
    if pgrep -f "$1" >/dev/null; then [ "$2" = running ] && return 0
    else [ "$2" = gone ] && return 0; fi
    sleep 0.1
  done
  return 1
}

# `$1 gateway` in front of the ledger server, its standard input held open
# as a client holds it, sent SIGTERM as a client that closes it does.
ends_on_sigterm() {
  local work ledger pid
  work="$(mktemp -d -p "$here")"
  ledger="$work/signalled.txt"
  mkfifo "$work/in"
  # Not through as_user, a function: `&` would put a subshell between.
  env -i HOME="$here" PATH="$user_path" "$1" gateway --store "$work/records.sqlite" -- \
    "$python" cli/tests/upstream/ledger.py "$ledger" <"$work/in" >"$work/out" 2>"$work/err" &
  pid=$!
  exec 7>"$work/in"
  # A client's first words: the gateway starts the session's upstream.
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"try-packages","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' >&7
  # The tools listed: the session's upstream serves. Then the upstream
  # itself (the launcher's and the gateway's command lines name the
  # ledger too, but do not start with the server).
  for _ in $(seq 300); do grep -q '"id":2' "$work/out" && break; sleep 0.1; done
  grep -q '"id":2' "$work/out" && until_it_is "^$python cli/tests/upstream/ledger.py $ledger" running ||
    { echo "try-packages.sh: the gateway never listed the tools: $(cat "$work/err")" >&2; exit 1; }
  kill -TERM "$pid"
  wait "$pid" || true
  if ! until_it_is "$ledger" gone; then
    echo "try-packages.sh: SIGTERM to $1 left its gateway or upstream running:" >&2
    pgrep -af "$ledger" >&2
    exit 1
  fi
  exec 7>&-
  echo "SIGTERM to $1: the gateway and its upstream ended"
}

echo "== pip install the wheel into a fresh virtual environment"
as_user "$python" -m venv "$here/venv"
as_user "$here/venv/bin/pip" install --quiet --no-index --disable-pip-version-check dist/idem_mcp-"$version"-*.whl

echo "== npm install the tarballs into a fresh folder"
mkdir -p "$here/node"
tarballs=(dist/npm/*.tgz)
(cd "$here/node" && as_user npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
  "${tarballs[@]/#/$OLDPWD/}")

for installed in "$here/venv/bin/idem-mcp" "$here/node/node_modules/.bin/idem-mcp"; do
  echo "== $installed"
  said="$(as_user "$installed" --version)"
  if [ "$said" != "idem $version" ]; then
    echo "try-packages.sh: $installed --version says \"$said\", not \"idem $version\"" >&2
    exit 1
  fi
  work="$(mktemp -d -p "$here")"
  report="$(as_user "$python" cli/tests/upstream/client.py stdio "$installed" gateway \
    --store "$work/records.sqlite" -- "$python" cli/tests/upstream/ledger.py "$work/ledger.txt")"
  lines="$(wc -l <"$work/ledger.txt")"
  echo "$said; a write called twice through its gateway: $lines ledger line; the client saw $report"
  if [ "$lines" -ne 1 ]; then
    echo "try-packages.sh: the write ran $lines times through $installed" >&2
    exit 1
  fi
done
ends_on_sigterm "$here/node/node_modules/.bin/idem-mcp"

# npx finds it by its package's name; a failure's exit code and message
# come through the launcher as the binary gave them.
said="$(cd "$here/node" && as_user npx --no-install idem-mcp --version)"
[ "$said" = "idem $version" ] || { echo "try-packages.sh: npx idem-mcp --version said: $said" >&2; exit 1; }
direct=0 launched=0
as_user "$here/venv/bin/idem-mcp" show --store "$here/none.sqlite" idem:00 2>"$here/direct.err" || direct=$?
as_user "$here/node/node_modules/.bin/idem-mcp" show --store "$here/none.sqlite" idem:00 2>"$here/launched.err" || launched=$?
if [ "$direct" -eq 0 ] || [ "$direct" -ne "$launched" ] || ! cmp -s "$here/direct.err" "$here/launched.err"; then
  echo "try-packages.sh: a failure differs through the launcher: exit $direct against $launched" >&2
  exit 1
fi
echo "npx idem-mcp --version: $said; a failure through the launcher: exit $launched, as the binary's"

# The launcher where its platform's package is missing.
alone="$(mktemp -d -p "$here")"
cp -r "$here/node/node_modules/idem-mcp" "$alone/"
if said="$(as_user node "$alone/idem-mcp/bin/idem-mcp.js" --version 2>&1)"; then
  echo "try-packages.sh: the launcher ran without its platform's package: $said" >&2
  exit 1
fi
case "$said" in
  *"this platform is "*"cargo install idem-cli --locked"*) echo "without its package: $said" | head -n 1 ;;
  *) echo "try-packages.sh: the launcher without its package said: $said" >&2; exit 1 ;;
esac
