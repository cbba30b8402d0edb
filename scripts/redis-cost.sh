#!/usr/bin/env bash
# What a call costs on both sides of the wire, for idem and its baselines,
# on a private Redis server: the server's µs per call from
# `INFO commandstats`, and the client's instructions per call counted by
# callgrind. Neither moves with the client's speed: the µs move with the
# server's CPU (compare figures of one run), the instructions not at all.
#
#   scripts/redis-cost.sh [CALLS] [LOADGEN]
#       CALLS 100000 (the client's instructions over a fifth of them);
#       LOADGEN target/release/examples/loadgen (built if missing)
#
# The rows:
#   idem unique / duplicate   the load generator (C=64) through idem
#   floor unique / duplicate  the same key derived and the same two
#                             commands, without idem (`--store redis-floor`)
#   floor, minimal client     the same over a minimal pipelining client of
#                             the load generator's own, instead of the
#                             `redis` crate's (`--store redis-floor-pipe`)
#   redis-benchmark 2 SETs    two plain SETs a call (an unfenced design's
#                             claim and record), redis-benchmark -c 64
# Server µs: each command's µs in all divided by the calls. Redis counts a
# command a script or function runs both on its own line and inside the
# script's (FCALL's time includes its GET and SET), so the server time per
# call is the script's plus the commands sent on their own: one GET and
# one SET per script call are taken out at their commands' average cost
# (its usual path), an estimate. With PER_COMMAND=1 each command's line is
# printed too. Client instructions are followed by SHA-256's share, in
# brackets: valgrind makes it run in software (see scripts/lib/redis.sh).
set -euo pipefail

calls=${1:-100000}
loadgen=${2:-}
cd "$(dirname "$0")/.."
source scripts/lib/redis.sh
need_tools redis-cost "$redis_server" redis-cli redis-benchmark valgrind
loadgen=$(loadgen_binary "$loadgen")
start_private_redis 6398

# The server's µs per call since the last reset, over $1 calls (see above).
server_us() {
    redis-cli -p "$port" info commandstats | tr -d '\r' | awk -F'[:,=]' -v n="$1" -v each="${PER_COMMAND:-}" '
        /^cmdstat_/ && $0 !~ /cmdstat_(info|config|resetstat|ping|function)/ {
            name = substr($1, 9); calls[name] = $3; usec[name] = $5
            if (each) printf "    %-10s %6.2f µs  (%d calls)\n", name, $5 / n, $3 > "/dev/stderr"
        }
        END {
            scripts = calls["evalsha"] + calls["eval"] + calls["fcall"]
            total = 0
            for (name in usec) {
                own = calls[name]
                if (name == "get" || name == "set") own -= scripts
                if (name == "evalsha" || name == "eval" || name == "fcall") own = calls[name]
                if (own < 0) own = 0
                total += usec[name] * own / calls[name]
            }
            printf "%.2f", total / n
        }'
}

# The client's instructions per call: `$@` under callgrind, over $1 calls;
# "TOTAL (SHA)", SHA-256's share in brackets (see callgrind_per_call).
client_instructions() {
    local n=$1
    shift
    valgrind --tool=callgrind --callgrind-out-file="$work/client.out" "$@" >/dev/null 2>&1
    local total sha
    read -r total sha < <(callgrind_per_call "$work/client.out" "$n")
    printf '%s (%s)' "$total" "$sha"
}

url="redis://127.0.0.1:$port"
few=$((calls / 5))
printf '%-32s %16s %28s\n' "" "server µs/call" "client instr./call (SHA-256)"
row() {
    local what=$1 store=$2 mode=$3
    redis-cli -p "$port" config resetstat >/dev/null
    "$loadgen" --store "$store" --url "$url" --calls "$calls" --concurrency 64 --mode "$mode" >/dev/null 2>&1
    local us
    us=$(server_us "$calls")
    local ins
    ins=$(client_instructions "$few" "$loadgen" --store "$store" --url "$url" --calls "$few" \
        --concurrency 64 --mode "$mode" --threads 1)
    printf '%-32s %16s %28s\n' "$what" "$us" "$ins"
}
row "idem unique" redis unique
row "idem duplicate" redis duplicate
row "floor unique" redis-floor unique
row "floor duplicate" redis-floor duplicate
row "floor, minimal client, unique" redis-floor-pipe unique
row "floor, minimal client, dup." redis-floor-pipe duplicate
redis-cli -p "$port" config resetstat >/dev/null
redis-benchmark -p "$port" -t set -n $((calls * 2)) -c 64 -r 1000000 -q >/dev/null 2>&1
us=$(server_us "$calls")
ins=$(client_instructions "$few" redis-benchmark -p "$port" -t set -n $((few * 2)) -c 64 -r 1000000 -q)
printf '%-32s %16s %28s\n' "redis-benchmark 2 SETs" "$us" "$ins"
