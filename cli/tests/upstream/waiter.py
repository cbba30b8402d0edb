"""An agent whose call waits for a person, with the official MCP Python
SDK's client, for cli/tests/first_hour.rs: `idem gateway` serves `append`
with `approval = "required"` and `approval_wait`, so a call waits for the
decision. The client gives a progress callback; on the first progress
notification (which names the operation's key) a person decides from
another process, with `idem approve` or `idem deny`, and the waiting call
answers what they decided. Then a waiting call is cancelled by its
client (the SDK sends `notifications/cancelled`), approved from another
process, and called again.

Usage: python3 waiter.py MODE STORE IDEM COMMAND [ARG ...]: MODE is the
SDK's ("auto" or "legacy"), STORE the gateway's store, IDEM the `idem`
binary, and the gateway is started as the client's child (stdio); or
MODE "http" and, for COMMAND, the URL of a gateway serving streamable
HTTP. Prints one JSON object: the progress messages, what each call
came to, and for the cancelled one whether `idem approve` found it still
awaiting (its exit code) and what the next call came to. A gateway on
stdio logs at `info` (IDEM_LOG) to this script's standard error.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def outcome(result):
    """What a tool call came to: its text, marked when an error."""
    data = result.model_dump(by_alias=True, mode="json")
    text = " ".join(c.get("text", "") for c in data.get("content", []))
    return {"error": text} if data.get("isError") else {"ok": text}


async def main(mode, store, idem, command):
    if mode == "http":
        server, mode = command[0], "auto"
    else:
        env = {**os.environ, "IDEM_LOG": "info"}
        server = StdioServerParameters(command=command[0], args=command[1:], env=env)
    report = {"progress": []}
    decisions = [
        ("approved", "wait-1", ["approve", "--by", "ops"]),
        ("refused", "wait-2", ["deny", "--by", "ops", "--reason", "not now"]),
    ]
    async with Client(server, mode=mode) as client:
        for name, entry, decision in decisions:
            decided = []

            async def decide(key, decision=decision):
                process = await asyncio.create_subprocess_exec(
                    idem, decision[0], "--store", store, key, *decision[1:]
                )
                await process.wait()

            async def progress(_progress, _total, message, decided=decided, decide=decide):
                report["progress"].append(message)
                if not decided and message and "(operation " in message:
                    key = message.rsplit("(operation ", 1)[1].rstrip(")")
                    decided.append(asyncio.create_task(decide(key)))

            # A guard against a hang, should nobody decide: not a timing check.
            async with asyncio.timeout(120):
                result = await client.call_tool("append", {"entry": entry}, progress_callback=progress)
            report[name] = outcome(result)
            report[name]["decided"] = len(decided)
        report["cancelled"] = await cancelled(client, idem, store)
    print(json.dumps(report))


async def cancelled(client, idem, store):
    """A waiting call cancelled at its first progress notification; then
    approved from another process, and called again."""
    keys = []
    waiting = None

    async def progress(_progress, _total, message):
        if not keys and message and "(operation " in message:
            keys.append(message.rsplit("(operation ", 1)[1].rstrip(")"))
            waiting.cancel()

    args = {"entry": "wait-3"}
    waiting = asyncio.create_task(client.call_tool("append", args, progress_callback=progress))
    report = {}
    try:
        async with asyncio.timeout(120):
            report = outcome(await waiting)
    except asyncio.CancelledError:
        report["cancelled"] = True
    approve = await asyncio.create_subprocess_exec(
        idem, "approve", "--store", store, keys[0], "--by", "ops"
    )
    report["approve_rc"] = await approve.wait()
    async with asyncio.timeout(120):
        report["next"] = outcome(await client.call_tool("append", args))
    return report


asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
