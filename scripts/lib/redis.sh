# Sourced by the scripts that run a private redis-server of their own: the
# server's program, the tools they need, the load generator, a free
# loopback port, and waiting for a server to answer.

# The server's program: REDIS_SERVER=/path/to/valkey-server (8.1+) or a
# redis-server 8.4+ measures the settle by `SET .. IFEQ`.
redis_server=${REDIS_SERVER:-redis-server}

# The first free loopback port from $1 up.
free_port() {
    local port=$1
    while (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; do port=$((port + 1)); done
    echo "$port"
}

# Waits up to 20 s for the server on port $1 to answer; fails saying so.
wait_for_redis() {
    local port=$1
    for _ in $(seq 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "redis-server on port $port did not answer" >&2
    return 1
}

# Exits, naming the tool, unless each of $2.. is installed ($1: the script).
need_tools() {
    local script=$1
    shift
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$script: $tool is not installed" >&2; exit 2; }
    done
}

# The load generator: $1 if given, else built in release mode.
loadgen_binary() {
    if [ -n "$1" ]; then
        echo "$1"
    else
        cargo build --release --example loadgen >&2
        echo target/release/examples/loadgen
    fi
}

# Instructions per call in callgrind profile $1 over $2 calls: "TOTAL SHA",
# SHA being SHA-256's share. Valgrind hides the CPU's SHA extensions, so
# the `sha2` crate runs its software rounds under it (about 3,400
# instructions a 64-byte block, two blocks for a usual key), while on a
# CPU that has them (`grep sha_ni /proc/cpuinfo`) each instruction does
# two rounds: the share is given so that a reader can set it apart.
callgrind_per_call() {
    local profile=$1 n=$2 total sha
    total=$(awk '/^summary:/ { print $2 }' "$profile")
    sha=$(callgrind_annotate --inclusive=yes --threshold=100 "$profile" 2>/dev/null |
        awk '/sha2::sha256::compress256 / && !found { gsub(",", "", $1); print $1; found = 1 }')
    awk -v t="$total" -v s="${sha:-0}" -v n="$n" 'BEGIN { printf "%.0f %.0f\n", t / n, s / n }'
}

# Starts a private redis-server on the first free loopback port from $1,
# in a directory of its own: sets `work` (that directory) and `port`, and
# shuts the server down and removes the directory at exit.
start_private_redis() {
    work=$(mktemp -d)
    port=$(free_port "$1")
    trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
    "$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
        >"$work/server.log" 2>&1 &
    wait_for_redis "$port"
}
