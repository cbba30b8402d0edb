#!/usr/bin/env bash
# idem's calls per second on PostgreSQL and SQLite beside each store's own
# floor, in one run: the load generator through idem, then the same
# statements through the same client library without idem
# (`--store postgres-floor|sqlite-floor`, examples/loadgen/floor.rs),
# alternating, ROUNDS rounds of each, unique and duplicate calls. Prints the
# median calls per second and p99 of each, and idem / floor.
#
#   scripts/store-floors.sh [CALLS] [ROUNDS] [CONCURRENCY] [LOADGEN]
#       CALLS 20000; ROUNDS 5; CONCURRENCY 16;
#       LOADGEN target/release/examples/loadgen (built if missing)
#
# PostgreSQL: the machine's (postgres://postgres@127.0.0.1:5432/test, or
# IDEM_PG_URL). SQLite: a new file per run in a temporary directory.
set -euo pipefail

calls=${1:-20000}
rounds=${2:-5}
concurrency=${3:-16}
loadgen=${4:-}
cd "$(dirname "$0")/.."
if [ -z "$loadgen" ]; then
    cargo build --release --example loadgen >&2
    loadgen=target/release/examples/loadgen
fi
pg=${IDEM_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {
    local store=$1 mode=$2 url
    case $store in
        postgres*) url=$pg ;;
        *) url="$work/$RANDOM$RANDOM.db" ;;
    esac
    "$loadgen" --store "$store" --url "$url" --calls "$calls" --concurrency "$concurrency" \
        --mode "$mode" 2>/dev/null
}

for store in postgres sqlite; do
    for mode in unique duplicate; do
        : >"$work/idem" && : >"$work/floor"
        for _ in $(seq "$rounds"); do
            run "$store" "$mode" >>"$work/idem"
            run "$store-floor" "$mode" >>"$work/floor"
        done
        python3 - "$store" "$mode" "$work/idem" "$work/floor" <<'PY'
import json, statistics, sys
store, mode, idem, floor = sys.argv[1:]
def read(path):
    runs = [json.loads(line) for line in open(path) if line.startswith("{")]
    return (statistics.median(r["ops_per_s"] for r in runs),
            statistics.median(r["p99_us"] for r in runs), len(runs))
(i, ip99, n), (f, fp99, _) = read(idem), read(floor)
print(f"{store:8} {mode:9} idem {i:8.0f}/s p99 {ip99/1000:6.2f} ms | "
      f"floor {f:8.0f}/s p99 {fp99/1000:6.2f} ms | idem/floor {i/f:4.2f} ({n} rounds)")
PY
    done
done
