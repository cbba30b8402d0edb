"""Calls one write twice with the official MCP Python SDK's client, for
cli/tests/write_rules.rs, and prints what each call saw as one JSON
object.

Usage: python3 rules.py progress COMMAND [ARG ...]
       python3 rules.py confirm COMMAND [ARG ...]
       python3 rules.py task COMMAND [ARG ...]

- progress: `append_with_progress`, each call with a progress callback:
  how many notifications each call got.
- confirm: `append_confirmed`, which asks the client to confirm (an
  `input_required` result on MCP 2026-07-28, a request mid-call before):
  the protocol, how often the client was asked, and each call's text.
- task: `simulate-research-query` of `server-everything`, called as a task
  (the tasks of MCP 2025-11-25): each call's task id, and how many tasks
  the server then lists.

Both calls are in one session, with the same arguments; `_meta` marks a
call the gateway replayed.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

asked = []


async def confirm(context, params):
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"confirm": True})


def replayed(result):
    return bool((result.meta or {}).get("idem/replayed"))


def texts(result):
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def progress(client):
    seen = []
    for call in range(2):
        notes = []

        async def on_progress(progress, total, message, notes=notes):
            notes.append(progress)

        result = await client.call_tool(
            "append_with_progress", {"entry": "p"}, progress_callback=on_progress
        )
        seen.append({"progress": len(notes), "replayed": replayed(result), "text": texts(result)})
    return {"calls": seen}


async def confirmed(client):
    calls = []
    for call in range(2):
        result = await client.call_tool("append_confirmed", {"entry": "c"})
        calls.append({"replayed": replayed(result), "text": texts(result)})
    return {"protocol": client.protocol_version, "asked": len(asked), "calls": calls}


async def task(client):
    dispatcher = client.session._dispatcher
    params = {"name": "simulate-research-query", "arguments": {"topic": "twice"},
              "task": {"ttl": 60000}}
    ids = []
    for call in range(2):
        created = await dispatcher.send_raw_request("tools/call", params, {})
        ids.append(created["task"]["taskId"])
    listed = await dispatcher.send_raw_request("tasks/list", {}, {})
    return {"ids": ids, "listed": len(listed.get("tasks", []))}


async def main():
    mode, command = sys.argv[1], sys.argv[2:]
    server = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server, elicitation_callback=confirm) as client:
        run = {"progress": progress, "confirm": confirmed, "task": task}[mode]
        print(json.dumps(await run(client)))


asyncio.run(main())
