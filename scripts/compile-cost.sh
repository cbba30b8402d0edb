#!/usr/bin/env bash
# What the tool macros add to a build: a crate of N async functions
# (half read tools with two flat parameters, half write tools), compiled
# once with #[read_tool] / #[write_tool] and a registry of all of them, and
# once with the macros but no registry (expansion and type-checking alone,
# without the registry's per-tool instantiation of the wrapper), once as the
# plain functions plus the arguments structs a hand-written tool would
# derive, and once as the plain functions alone. Both crates share one target directory,
# so dependencies are built once; each measurement is a rebuild of the
# crate alone after touching it. Prints one JSON line.
#
#   scripts/compile-cost.sh [N=50] [RUNS=5]
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-50}
runs=${2:-5}
work="$root/target/compile-cost"
export CARGO_TARGET_DIR="$work/target"

generate() { # $1 = with | unregistered | derives | without
  local kind=$1 dir="$work/$1"
  mkdir -p "$dir/src"
  cat > "$dir/Cargo.toml" <<EOF
[package]
name = "compile-cost-$kind"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
idem = { path = "$root" }
schemars = "1.2"
serde = { version = "1", features = ["derive"] }

[workspace]
EOF
  {
    echo "#![allow(dead_code)]"
    echo "use idem::prelude::*;"
    # Parameter doc comments are the macro's to read; plain functions get
    # ordinary comments in their place.
    local doc="//" attr=false
    [ "$kind" != without ] && doc="///" attr=true
    for ((i = 0; i < n / 2; i++)); do
      $attr && echo "#[read_tool]"
      cat <<EOF
/// Read tool $i.
pub async fn read_$i(
    $doc What to look for.
    query: String,
    $doc At most this many.
    limit: Option<u32>,
    ctx: &Ctx,
) -> Result<String, String> {
    Ok(format!("{query} {limit:?} {}", ctx.run_id()))
}
EOF
    done
    for ((i = 0; i < n - n / 2; i++)); do
      $attr && echo "#[write_tool]"
      cat <<EOF
/// Write tool $i.
pub async fn write_$i(amount: u64, customer_id: String, ctx: &WriteCtx) -> Result<String, String> {
    Ok(format!("{amount} {customer_id} {}", ctx.idem_key()))
}
EOF
    done
    if [ "$kind" = derives ]; then
      # What a hand-written tool needs anyway: an arguments struct with
      # serde's and schemars' derives, one per tool.
      for ((i = 0; i < n; i++)); do
        cat <<EOF
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Args$i { query: String, limit: Option<u32> }
EOF
      done
    fi
    if [ "$kind" = with ]; then
      echo "pub fn registry() -> Registry<()> {"
      echo "    Registry::builder(())"
      for ((i = 0; i < n / 2; i++)); do echo "        .tool(read_$i)"; done
      for ((i = 0; i < n - n / 2; i++)); do echo "        .tool(write_$i)"; done
      echo "        .build()"
      echo "        .expect(\"registry\")"
      echo "}"
    fi
  } > "$dir/src/lib.rs"
}

measure() { # $1 = with | without; prints the median rebuild time in seconds
  local dir="$work/$1" times=()
  (cd "$dir" && cargo build -q)
  for ((r = 0; r < runs; r++)); do
    touch "$dir/src/lib.rs"
    local start end
    start=$(date +%s.%N)
    (cd "$dir" && cargo build -q)
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

generate with
generate unregistered
generate derives
generate without
with=$(measure with)
unregistered=$(measure unregistered)
derives=$(measure derives)
without=$(measure without)
per_tool_ms=$(echo "($with - $without) * 1000 / $n" | bc -l)
printf '{"tools":%d,"runs":%d,"profile":"dev","with_macros_s":%.3f,"macros_unregistered_s":%.3f,"plain_with_arg_derives_s":%.3f,"without_macros_s":%.3f,"added_per_tool_ms":%.1f}\n' \
  "$n" "$runs" "$with" "$unregistered" "$derives" "$without" "$per_tool_ms"
