#!/usr/bin/env bash
# Instructions per call of the load generator against Redis, counted by
# callgrind in the server and in the client: unlike calls per second on
# this VM, whose speed moves by 2x for hours, the counts repeat to within
# about 1% (the server's depend a little on how commands batch), so two
# builds compare without alternating them.
#
#   scripts/redis-instructions.sh [MODE] [CALLS] [LOADGEN]
#       MODE unique (default), duplicate or mixed; CALLS 20000;
#       LOADGEN target/release/examples/loadgen (built if missing)
#
# Prints one line: mode, calls, server and client instructions per call,
# and the client's SHA-256 share.
# KEEP=DIR keeps the two callgrind profiles there (server.out, client.out).
# Both counts include start-up (a few hundred per call at 20,000 calls).
set -euo pipefail

mode=${1:-unique}
calls=${2:-20000}
loadgen=${3:-}
cd "$(dirname "$0")/.."
source scripts/lib/redis.sh
need_tools redis-instructions valgrind "$redis_server" redis-cli
loadgen=$(loadgen_binary "$loadgen")
work=$(mktemp -d)
port=$(free_port 6397)
cleanup() {
    [ -n "${KEEP:-}" ] && cp "$work"/*.out "$KEEP"/ 2>/dev/null
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

valgrind --tool=callgrind --callgrind-out-file="$work/server.out" \
    "$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    >"$work/server.log" 2>&1 &
server=$!
wait_for_redis "$port"
valgrind --tool=callgrind --callgrind-out-file="$work/client.out" \
    "$loadgen" --store redis --url "redis://127.0.0.1:$port" --calls "$calls" \
    --concurrency 64 --mode "$mode" --threads 1 >"$work/client.json" 2>"$work/client.log"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$server" || true

read -r server _ < <(callgrind_per_call "$work/server.out" "$calls")
read -r client sha < <(callgrind_per_call "$work/client.out" "$calls")
echo "$mode $calls calls: server $server, client $client instructions per call ($sha of them SHA-256 in software, see scripts/lib/redis.sh)"
