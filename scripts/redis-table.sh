#!/usr/bin/env bash
# The Redis tables of BENCHMARKS.md: `redis-benchmark -t set`, the load
# generator in its three modes and its floor (`--store redis-floor`, unique
# calls: the same key and commands without idem), alternating on one private Redis pinned to
# core 0, the clients pinned to core 1, emptied before each run; or this
# build against another one, alternating in one mode.
#
#   scripts/redis-table.sh [ROUNDS] [CALLS]          (default 5 rounds, 400000 calls)
#   CLUSTER=1 scripts/redis-table.sh                  (a cluster of three masters instead)
#   BASELINE=/path/to/other/loadgen [MODE=unique] scripts/redis-table.sh
#
# Every round runs each side once, each round starting one side later, so
# that no side always runs first or last. It prints each round's calls/s,
# then per side the median with the range, and the ratios computed per
# round (median and range): that is what the tables in BENCHMARKS.md quote.
# With CLUSTER=1 the three masters are pinned to core 0 and there is no
# redis-benchmark column (it does not spread over a cluster's slots).
set -euo pipefail

rounds=${1:-5}
calls=${2:-400000}
concurrency=64
cd "$(dirname "$0")/.."

source scripts/lib/redis.sh
need_tools redis-table "$redis_server" redis-cli redis-benchmark taskset
loadgen=$(loadgen_binary "")

work=$(mktemp -d)
ports=()
cleanup() {
    for pidfile in "$work"/*.pid; do
        [ -e "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

start_server() {
    local port=$1
    shift
    taskset -c 0 "$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$work" --daemonize yes --pidfile "$work/$port.pid" \
        --logfile "$work/$port.log" "$@"
    wait_for_redis "$port" || { echo "redis-table: see $work/$port.log" >&2; exit 1; }
}

next=6390
if [ "${CLUSTER:-0}" = 1 ]; then
    for _ in 1 2 3; do
        port=$(free_port "$next")
        start_server "$port" --cluster-enabled yes --cluster-config-file "nodes-$port.conf"
        ports+=("$port")
        next=$((port + 1))
    done
    redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
    until redis-cli -p "${ports[0]}" cluster info | grep -q cluster_state:ok; do sleep 0.1; done
    store=redis-cluster
    url=$(printf 'redis://127.0.0.1:%s,' "${ports[@]}")
    url=${url%,}
    sides=(unique duplicate mixed)
elif [ -n "${BASELINE:-}" ]; then
    port=$(free_port "$next")
    start_server "$port"
    ports=("$port")
    store=redis
    url="redis://127.0.0.1:$port"
    sides=("${MODE:-unique}" baseline)
else
    port=$(free_port "$next")
    start_server "$port"
    ports=("$port")
    store=redis
    url="redis://127.0.0.1:$port"
    sides=(redis-benchmark unique duplicate mixed floor)
fi

empty() {
    for port in "${ports[@]}"; do redis-cli -p "$port" flushall >/dev/null; done
}

# One run of `side`: prints "calls/s p50 p99 p999" (µs; '-' for redis-benchmark).
run() {
    local side=$1 out
    empty
    case $side in
    redis-benchmark)
        out=$(taskset -c 1 redis-benchmark -p "${ports[0]}" -t set -n "$calls" -c "$concurrency" --csv)
        echo "$out" | awk -F'"' '$2 == "SET" { printf "%.0f - - -\n", $4 }'
        ;;
    *)
        local bin=$loadgen mode=$side kind=$store
        [ "$side" = baseline ] && bin=$BASELINE && mode=${MODE:-unique}
        # The same key and two commands without idem (examples/loadgen/floor.rs).
        [ "$side" = floor ] && kind=redis-floor && mode=unique
        out=$(taskset -c 1 "$bin" --store "$kind" --url "$url" --calls "$calls" \
            --concurrency "$concurrency" --mode "$mode" --threads 1 2>/dev/null)
        echo "$out" | jq -r '"\(.ops_per_s) \(.p50_us) \(.p99_us) \(.p999_us // "-")"'
        ;;
    esac
}

declare -A rate latency
for r in $(seq "$rounds"); do
    n=${#sides[@]}
    for i in $(seq 0 $((n - 1))); do
        side=${sides[$(((i + r - 1) % n))]}
        read -r ops p50 p99 p999 < <(run "$side")
        rate[$r,$side]=$ops
        latency[$r,$side]="$p50 / $p99 / $p999"
        echo "round $r: $side $ops calls/s (p50/p99/p999 µs: ${latency[$r,$side]})" >&2
    done
done

echo "| round | $(IFS='|'; echo "${sides[*]}" | sed 's/|/ | /g') |"
echo "|---|$(printf -- '---|%.0s' "${sides[@]}")"
for r in $(seq "$rounds"); do
    row="| $r |"
    for side in "${sides[@]}"; do row+=" ${rate[$r,$side]} |"; done
    echo "$row"
done
echo
# The median and range of numbers given one per line, with `digits` decimals.
summary() {
    sort -g | awk -v d="${1:-0}" '{ v[NR] = $1 }
        END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              f = "%." d "f"; printf f " (" f "–" f ")", m, v[1], v[NR] }'
}
for side in "${sides[@]}"; do
    echo "- $side: median $(for r in $(seq "$rounds"); do echo "${rate[$r,$side]}"; done | summary) calls/s"
    [ "$side" = redis-benchmark ] && continue
    echo "  p50 / p99 / p999 µs per round: $(for r in $(seq "$rounds"); do printf '%s; ' "${latency[$r,$side]}"; done)"
done
ratio() {
    local a=$1 b=$2
    for r in $(seq "$rounds"); do awk -v a="${rate[$r,$a]}" -v b="${rate[$r,$b]}" 'BEGIN { print a / b }'; done | summary 2
}
has() { [[ " ${sides[*]} " == *" $1 "* ]]; }
has redis-benchmark && echo "- unique / redis-benchmark: $(ratio unique redis-benchmark)"
has duplicate && has unique && echo "- duplicate / unique: $(ratio duplicate unique)"
has mixed && has unique && echo "- mixed / unique: $(ratio mixed unique)"
has floor && echo "- unique / floor: $(ratio unique floor)"
has baseline && echo "- ${MODE:-unique} / baseline: $(ratio "${MODE:-unique}" baseline)"
exit 0
