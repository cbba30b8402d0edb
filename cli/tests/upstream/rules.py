"""Calls one write twice with the official MCP Python SDK's client, for
cli/tests/write_rules.rs, and prints what each call saw as one JSON
object.

Usage: python3 rules.py progress COMMAND [ARG ...]
       python3 rules.py confirm COMMAND [ARG ...]
       python3 rules.py task COMMAND [ARG ...]
       python3 rules.py keys COMMAND [ARG ...]

- progress: `append_with_progress`, each call with a progress callback:
  how many notifications each call got.
- confirm: `append_confirmed`, which asks the client to confirm (an
  `input_required` result on MCP 2026-07-28, a request mid-call before):
  the protocol, how often the client was asked, and each call's text.
- task: `simulate-research-query` of `server-everything`, called as a task
  (the tasks of MCP 2025-11-25): each call's task id, and how many tasks
  the server then lists.
- keys: `append_keyed` of `ledger.py`, keyed by the gateway, then on a key
  the client sends in `_meta["idem/operation_key"]`, then in
  `params.idempotencyKey`; each key once more with other arguments.

The calls are in one session, with the same arguments; `_meta` marks a
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


async def keys(client):
    dispatcher = client.session._dispatcher

    async def call(entry, meta=None, key=None):
        params = {"name": "append_keyed", "arguments": {"entry": entry}}
        if meta is not None:
            params["_meta"] = meta
        if key is not None:
            params["idempotencyKey"] = key
        result = await dispatcher.send_raw_request("tools/call", params, {})
        return {"error": result.get("isError", False),
                "replayed": bool(result.get("_meta", {}).get("idem/replayed")),
                "text": " ".join(c.get("text", "") for c in result["content"])}

    by_meta = {"idem/operation_key": "op-meta"}
    return {
        "derived": await call("d"),
        "meta": await call("m", meta=by_meta),
        "meta_again": await call("m", meta=by_meta),
        "meta_other": await call("other", meta=by_meta),
        "param": await call("p", key="op-param"),
        "param_again": await call("p", key="op-param"),
        "param_other": await call("other", key="op-param"),
    }


async def main():
    mode, command = sys.argv[1], sys.argv[2:]
    server = StdioServerParameters(command=command[0], args=command[1:])
    # The raw requests of `task` and `keys` carry no 2026-07-28 envelope.
    era = "legacy" if mode in ("task", "keys") else "auto"
    async with Client(server, elicitation_callback=confirm, mode=era) as client:
        run = {"progress": progress, "confirm": confirmed, "task": task, "keys": keys}[mode]
        print(json.dumps(await run(client)))


asyncio.run(main())
