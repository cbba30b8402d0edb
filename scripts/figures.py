#!/usr/bin/env python3
"""Regenerates the tables of current figures that BENCHMARKS.md and
RELIABILITY.md open with, from the output of the commands each row names,
so that no figure is copied by hand.

    python3 scripts/figures.py [ROW ...]     # every row, or those named
    python3 scripts/figures.py --list        # the rows and their commands

A table lives between `<!-- figures:NAME -->` and `<!-- /figures:NAME -->`
in its file; each row's first cell is its name. A row not run this time
keeps its line as it was (with its own date), so one row can be measured
again alone. Needs release builds (`cargo build --release --examples &&
cargo build --release -p idem-cli --bins --examples`, which this script
runs), the machine's Redis and PostgreSQL, the Python MCP SDK and
valgrind, as the commands themselves do.
"""

import datetime
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REDIS = os.environ.get("IDEM_REDIS_URL", "redis://127.0.0.1:6379")
POSTGRES = os.environ.get("IDEM_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")


def run(command):
    """The command's standard output; a failure stops the script."""
    done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"figures: `{command}` failed:\n{done.stderr[-2000:]}")
    return done.stdout


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def ms(us):
    """A latency in µs, written in the unit that reads best."""
    return f"{us} µs" if us < 1000 else f"{us / 1000:.2f} ms"


def loadgen(store, mode, url=None):
    command = f"target/release/examples/loadgen --store {store} --calls 20000 --concurrency 16 --mode {mode}"
    if url:
        command += f" --url {url}"

    def cells():
        line = json_lines(run(command))[-1]
        return [f"{line['ops_per_s']:,} calls/s", f"p50 {ms(line['p50_us'])}, p99 {ms(line['p99_us'])}"]

    return command, cells


def instructions(mode):
    command = f"scripts/redis-instructions.sh {mode} 20000 target/release/examples/loadgen"

    def cells():
        line = run(command).strip().splitlines()[-1]
        found = re.search(r"server (\d+), client (\d+)", line)
        return [f"client {int(found[2]):,} instructions/call", f"server {int(found[1]):,}"]

    return command, cells


def gateway_overhead(setup):
    command = "target/release/examples/gateway_overhead --calls 1000 --rounds 5"

    def cells():
        lines = cached(command)
        of = {l["calls"]: l for l in lines if l["setup"] == setup}
        unique, dup, read = of["unique"], of["duplicate"], of["read"]
        return [
            f"unique p50 {ms(unique['p50_us'])}, p99 {ms(unique['p99_us'])}",
            f"duplicate p50 {ms(dup['p50_us'])}, p99 {ms(dup['p99_us'])}; "
            f"read p50 {ms(read['p50_us'])}, p99 {ms(read['p99_us'])}",
        ]

    return command, cells


def gateway_load(sessions, calls):
    command = f"target/release/examples/gateway_load --sessions {sessions} --calls {calls}"

    def cells():
        line = json_lines(run(command))[-1]
        return [
            f"{line['errors']} errors, {line['ledger_lines']} ledger lines for {line['operations']} operations",
            f"unique p50 {ms(line['unique_p50_us'])}; gateway {line['gateway_kib_per_session']} KiB/session",
        ]

    return command, cells


def chaos(store, verify=False):
    command = f"cargo run -q --release --all-features --example chaos -- --store {store} --seconds 30"
    if verify:
        command += " --verify"

    def cells():
        line = json_lines(run(command))[-1]
        faults = ", ".join(f"{n} {kind}" for kind, n in sorted(line["faults"].items()))
        return [
            f"{line['violations']} violations in {line['operations']:,} operations ({line['calls']:,} calls)",
            f"faults: {faults}",
        ]

    return command, cells


_CACHE = {}


def cached(command):
    if command not in _CACHE:
        _CACHE[command] = json_lines(run(command))
    return _CACHE[command]


TABLES = {
    ("BENCHMARKS.md", "current"): {
        "loadgen memory, unique": loadgen("memory", "unique"),
        "loadgen sqlite, unique": loadgen("sqlite", "unique"),
        "loadgen redis, unique": loadgen("redis", "unique", REDIS),
        "loadgen redis, duplicate": loadgen("redis", "duplicate", REDIS),
        "loadgen postgres, unique": loadgen("postgres", "unique", POSTGRES),
        "Redis client, unique": instructions("unique"),
        "Redis client, duplicate": instructions("duplicate"),
        "MCP server directly": gateway_overhead("direct"),
        "gateway, SQLite": gateway_overhead("gateway-sqlite"),
        "gateway, Redis": gateway_overhead("gateway-redis"),
        "gateway, 20 sessions x 5": gateway_load(20, 5),
    },
    ("RELIABILITY.md", "current"): {
        "chaos redis": chaos("redis"),
        "chaos postgres": chaos("postgres"),
        "chaos sqlite": chaos("sqlite"),
        "chaos redis --verify": chaos("redis", True),
    },
}


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores, {cpu}"


def rewrite(path, name, rows, chosen, today):
    full = os.path.join(ROOT, path)
    text = open(full).read()
    begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
    if begin not in text or end not in text:
        sys.exit(f"figures: {path} has no {begin} .. {end}")
    head, rest = text.split(begin, 1)
    table, tail = rest.split(end, 1)
    old = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0] in rows:
            old[cells[0]] = line
    lines = ["", f"Machine: {machine()}.", "",
             "| row | figure | and | date | command |", "|---|---|---|---|---|"]
    for row, (command, cells) in rows.items():
        if row in chosen:
            print(f"figures: {row} ...", file=sys.stderr)
            first, second = cells()
            lines.append(f"| {row} | {first} | {second} | {today} | `{command}` |")
        elif row in old:
            lines.append(old[row])
        else:
            lines.append(f"| {row} | not measured yet | | | `{command}` |")
    lines.append("")
    open(full, "w").write(head + begin + "\n".join(lines) + end + tail)


def main():
    args = sys.argv[1:]
    every = {row for rows in TABLES.values() for row in rows}
    if args == ["--list"]:
        for (path, _), rows in TABLES.items():
            for row, (command, _) in rows.items():
                print(f"{path}: {row}: {command}")
        return
    chosen = set(args) or every
    unknown = chosen - every
    if unknown:
        sys.exit(f"figures: no such row: {', '.join(sorted(unknown))} (--list names them)")
    run("cargo build -q --release --examples && cargo build -q --release -p idem-cli --bins --examples")
    today = datetime.date.today().isoformat()
    for (path, name), rows in TABLES.items():
        if chosen & set(rows):
            rewrite(path, name, rows, chosen, today)


if __name__ == "__main__":
    main()
