#!/usr/bin/env bash
# Server time per call on Redis, from `INFO commandstats`: what each
# command of a call costs the server, in µs, for idem's unique and
# duplicate calls (the load generator) and for the baseline, two plain
# SETs (an unfenced design's claim and record), measured by
# redis-benchmark on the same private server. Unlike calls per second,
# these do not move with the client's speed; they move with the server's
# CPU, so compare figures of one run.
#
#   scripts/redis-server-time.sh [CALLS] [LOADGEN]
#       CALLS 100000; LOADGEN target/release/examples/loadgen (built if missing)
#
# Prints, per kind of call, the µs each command took in all divided by the
# calls. `INFO commandstats` counts a command a script runs both on its own
# line and inside the script's (EVALSHA's time includes its GET and SET),
# so the server time per call is EVALSHA's plus the commands sent on their
# own: the script's GET and SET (one each per settle, in its usual path)
# are taken out at their commands' average cost, an estimate.
set -euo pipefail

calls=${1:-100000}
loadgen=${2:-}
cd "$(dirname "$0")/.."
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "redis-server-time: $tool is not installed" >&2; exit 2; }
done
if [ -z "$loadgen" ]; then
    cargo build --release --example loadgen >&2
    loadgen=target/release/examples/loadgen
fi

work=$(mktemp -d)
port=6398
while (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; do port=$((port + 1)); done
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    >"$work/server.log" 2>&1 &
for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done

# The commands' µs since the last reset, divided by the $1 calls made: one
# line per command, then the server time per call (see above).
per_call() {
    redis-cli -p "$port" info commandstats | tr -d '\r' | awk -F'[:,=]' -v n="$1" '
        /^cmdstat_/ && $0 !~ /cmdstat_(info|config|resetstat|ping)/ {
            name = substr($1, 9); calls[name] = $3; usec[name] = $5
            printf "  %-10s %6.2f µs  (%d calls)\n", name, $5 / n, $3
        }
        END {
            scripts = calls["evalsha"] + calls["eval"] + calls["fcall"]
            total = 0
            for (name in usec) {
                own = calls[name]
                if (name == "get" || name == "set") own -= scripts
                if (name == "evalsha" || name == "eval" || name == "fcall" || calls[name] == 0) own = calls[name]
                if (own < 0) own = 0
                total += usec[name] * own / calls[name]
            }
            printf "  %-10s %6.2f µs per call\n", "server", total / n
        }'
}

measure() {
    local what=$1
    shift
    redis-cli -p "$port" config resetstat >/dev/null
    "$@" >/dev/null 2>&1
    echo "$what"
    per_call "$calls"
}

url="redis://127.0.0.1:$port"
measure "idem, unique calls" \
    "$loadgen" --store redis --url "$url" --calls "$calls" --concurrency 64 --mode unique
measure "idem, duplicate calls" \
    "$loadgen" --store redis --url "$url" --calls "$calls" --concurrency 64 --mode duplicate
# Two SETs a call: the claim and the record of a design without fencing.
measure "baseline, two plain SETs a call" \
    redis-benchmark -p "$port" -t set -n $((calls * 2)) -c 64 -r 1000000 -q
