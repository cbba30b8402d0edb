"""How long an MCP client waits for its first answer from a server started
on stdio, directly and through `idem gateway`: the official Python SDK's
client, in its default mode, times from starting the server to the answer
of its first `tools/list`, several runs each, interleaved. The figures go
in BENCHMARKS.md ("Time to the first answer").

Usage: python3 scripts/first_answer.py IDEM RUNS -- COMMAND [ARG ...]
"""

import asyncio
import os
import statistics
import sys
import tempfile
import time

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def first_answer(command):
    started = time.perf_counter()
    async with Client(StdioServerParameters(command=command[0], args=command[1:])) as client:
        await client.list_tools()
        return time.perf_counter() - started


async def main():
    idem, runs = sys.argv[1], int(sys.argv[2])
    upstream = sys.argv[sys.argv.index("--") + 1:]
    times = {"direct": [], "gateway": []}
    with tempfile.TemporaryDirectory() as dir:
        store = os.path.join(dir, "records.sqlite")
        gateway = [idem, "gateway", "--store", store, "--", *upstream]
        for _ in range(runs):
            times["direct"].append(await first_answer(upstream))
            times["gateway"].append(await first_answer(gateway))
    for name, seconds in times.items():
        ms = sorted(s * 1000 for s in seconds)
        print(f"{name:8} median {statistics.median(ms):7.1f} ms  min {ms[0]:7.1f}  max {ms[-1]:7.1f}  ({runs} runs)")
    gap = statistics.median(times["gateway"]) - statistics.median(times["direct"])
    print(f"the gateway's first answer comes {gap * 1000:.1f} ms after the server's own")


asyncio.run(main())
