"""How long an MCP client waits for its first answer from a server started
on stdio, directly and through `idem gateway`: the official Python SDK's
client, in its default mode, times from starting the server to the answer
of its first `tools/list`, several runs each, interleaved. The figures go
in BENCHMARKS.md ("Time to the first answer").

Usage: python3 scripts/first_answer.py RUNS IDEM [IDEM ...] -- COMMAND [ARG ...]

Each IDEM is an `idem` binary (a baseline beside the build under test);
each is timed in front of the same server, in the same run.
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
    runs, split = int(sys.argv[1]), sys.argv.index("--")
    idems, upstream = sys.argv[2:split], sys.argv[split + 1:]
    times = {"direct": []} | {idem: [] for idem in idems}
    with tempfile.TemporaryDirectory() as dir:
        for _ in range(runs):
            times["direct"].append(await first_answer(upstream))
            for idem in idems:
                store = os.path.join(dir, f"records-{len(times[idem])}.sqlite")
                gateway = [idem, "gateway", "--store", store, "--", *upstream]
                times[idem].append(await first_answer(gateway))
    direct = statistics.median(times["direct"])
    for name, seconds in times.items():
        ms = sorted(s * 1000 for s in seconds)
        gap = "" if name == "direct" else f"  ({(statistics.median(seconds) - direct) * 1000:+.0f} ms)"
        print(f"{name:20} median {statistics.median(ms):7.1f} ms  min {ms[0]:7.1f}  max {ms[-1]:7.1f}{gap}")


asyncio.run(main())
