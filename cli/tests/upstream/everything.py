"""Drives an MCP server with the official MCP Python SDK's client through
every feature of the protocol that the MCP project's own
`server-everything` exercises, for cli/tests/gateway.rs, which runs it once
against the server directly and once through `idem gateway`, and compares.

Usage: python3 everything.py COMMAND [ARG ...]   (the server, over stdio)
       python3 everything.py --url URL           (the server over HTTP)

Prints one JSON object: for each feature, what the client saw. The client
declares sampling, elicitation and roots, and answers them itself:
sampling with "sampled: " and the prompt's text, elicitation by accepting
with fixed content, roots with one root (`EVERYTHING_ROOT`, if set: two
clients with roots of their own see each their own).
"""

import asyncio
import json
import os
import sys

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = os.environ.get("EVERYTHING_ROOT", "file:///idem/everything-root")
PATIENCE = 60
report = {}
logs = []
updates = []


async def sampling(context, params):
    text = " ".join(
        m.content.text for m in params.messages if getattr(m.content, "type", None) == "text"
    )
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled: {text}"),
        model="idem-test-model",
        stop_reason="endTurn",
    )


async def elicitation(context, params):
    return types.ElicitResult(
        action="accept",
        content={"name": "Ada", "check": True, "integer": 7, "number": 2.5, "enum": "option1"},
    )


async def roots(context):
    return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="everything-root")])


async def logged(params):
    logs.append(params.level)


async def messages(message):
    if isinstance(message, types.ServerNotification):
        inner = getattr(message, "root", message)
        if getattr(inner, "method", None) == "notifications/resources/updated":
            updates.append(inner.params.uri)


def dump(value):
    return value.model_dump(by_alias=True, mode="json", exclude_none=True)


def texts(result):
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def until(condition):
    with anyio.fail_after(PATIENCE):
        while not condition():
            await anyio.sleep(0.05)


async def check(name, coroutine):
    """Runs one check; a failure is its report, not the end of the run."""
    try:
        report[name] = await coroutine
    except Exception as error:  # noqa: BLE001 - the report says what failed
        report[name] = {"failed": f"{type(error).__name__}: {error}"}


async def task(client):
    """A write called as a task (SEP-1686): created, polled, its result."""
    dispatcher = client.session._dispatcher
    params = {"name": "simulate-research-query", "arguments": {"topic": "idem"},
              "task": {"ttl": 60000}}
    created = await dispatcher.send_raw_request("tools/call", params, {})
    task_id = created["task"]["taskId"]
    with anyio.fail_after(PATIENCE):
        while True:
            status = await dispatcher.send_raw_request("tasks/get", {"taskId": task_id}, {})
            if status["status"] in ("completed", "failed", "cancelled"):
                break
            await anyio.sleep(0.2)
    result = await dispatcher.send_raw_request("tasks/result", {"taskId": task_id}, {})
    return {"status": status["status"], "created": sorted(created["task"]),
            "text": "\n".join(c.get("text", "") for c in result.get("content", []))[:60]}


async def main():
    if sys.argv[1] == "--url":
        server = sys.argv[2]
    else:
        server = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with Client(
        server,
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=roots,
        logging_callback=logged,
        message_handler=messages,
    ) as client:
        report["protocol"] = client.protocol_version
        report["capabilities"] = dump(client.server_capabilities)
        report["instructions"] = (client.instructions or "")[:80]

        async def tools():
            listed = await client.list_tools()
            return sorted(t.name for t in listed.tools)

        async def prompts():
            listed = await client.list_prompts()
            got = await client.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
            return {"names": sorted(p.name for p in listed.prompts),
                    "messages": [dump(m) for m in got.messages]}

        async def resources():
            listed = await client.list_resources()
            templates = await client.list_resource_templates()
            read = await client.read_resource("demo://resource/dynamic/text/1")
            return {"uris": [r.uri for r in listed.resources][:5],
                    "templates": sorted(t.uri_template for t in templates.resource_templates),
                    # The text holds the time it was made.
                    "read": [(c.uri, c.mime_type) for c in read.contents]}

        async def completion():
            ref = types.PromptReference(type="ref/prompt", name="completable-prompt")
            done = await client.complete(ref, {"name": "department", "value": "E"})
            return sorted(done.completion.values)

        async def ping():
            await client.send_ping()
            return "pong"

        async def results():
            structured = await client.call_tool("get-structured-content", {"location": "New York"})
            image = await client.call_tool("get-tiny-image", {})
            links = await client.call_tool("get-resource-links", {"count": 2})
            return {"structured": structured.structured_content,
                    "image": [c.type for c in image.content],
                    "links": [c.type for c in links.content]}

        async def sampled():
            result = await client.call_tool("trigger-sampling-request", {"prompt": "hello"})
            return "sampled: " in json.dumps(dump(result))

        async def elicited():
            result = await client.call_tool("trigger-elicitation-request", {})
            return "Ada" in json.dumps(dump(result))

        async def listed_roots():
            result = await client.call_tool("get-roots-list", {})
            return ROOT in json.dumps(dump(result))

        async def progress():
            seen = []

            async def on_progress(progress, total, message):
                seen.append(progress)

            await client.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 4},
                progress_callback=on_progress,
            )
            return len(seen)

        async def logging():
            await client.set_logging_level("debug")
            first = await client.call_tool("toggle-simulated-logging", {})
            await until(lambda: logs)
            again = await client.call_tool("toggle-simulated-logging", {})
            # "Started ..." or "Stopped ...": the rest names the session.
            return {"received": bool(logs),
                    "toggles": [texts(first)[0].split()[0], texts(again)[0].split()[0]]}

        async def subscribed():
            uri = "demo://resource/dynamic/text/1"
            await client.subscribe_resource(uri)
            await client.call_tool("toggle-subscriber-updates", {})
            await until(lambda: uri in updates)
            await client.unsubscribe_resource(uri)
            return True

        await check("tools", tools())
        await check("prompts", prompts())
        await check("resources", resources())
        await check("completion", completion())
        await check("ping", ping())
        await check("results", results())
        await check("sampling", sampled())
        await check("elicitation", elicited())
        await check("roots", listed_roots())
        await check("progress", progress())
        await check("logging", logging())
        await check("subscriptions", subscribed())
        await check("task", task(client))
    print(json.dumps(report))


asyncio.run(main())
