#!/usr/bin/env bash
# Two Redis clients side by side, for choosing RedisStore's: the floor of a
# call (the same key and two commands as the load generator's
# `redis-floor`) through the `redis` crate and through `fred`, under one
# harness (scripts/client-floors, built here; not a workspace member, so
# nothing else compiles `fred`), on a private Redis. Prints the client's
# instructions per call, counted by callgrind, with SHA-256's share (see
# scripts/lib/redis.sh), unique and duplicate.
#
#   scripts/redis-clients.sh [CALLS]     CALLS 20000
set -euo pipefail

calls=${1:-20000}
cd "$(dirname "$0")/.."
source scripts/lib/redis.sh
need_tools redis-clients "$redis_server" redis-cli valgrind callgrind_annotate
CARGO_TARGET_DIR="$PWD/target/client-floors" \
    cargo build --release --manifest-path scripts/client-floors/Cargo.toml >&2
floors=target/client-floors/release/client-floors
start_private_redis 6399

printf '%-20s %32s\n' "" "client instructions/call (SHA-256)"
for client in redis fred; do
    for mode in unique duplicate; do
        valgrind --tool=callgrind --callgrind-out-file="$work/client.out" \
            "$floors" "$client" "redis://127.0.0.1:$port" "$calls" "$mode" >"$work/out.log" 2>&1 ||
            { cat "$work/out.log" >&2; exit 1; }
        read -r total sha < <(callgrind_per_call "$work/client.out" "$calls")
        printf '%-20s %32s\n' "$client $mode" "$total ($sha)"
    done
done
