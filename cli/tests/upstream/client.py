"""Drives `idem gateway` with the official MCP Python SDK's client, for
cli/tests/gateway.rs: in its default mode over streamable HTTP (the
stateless MCP 2026-07-28 when offered), or over stdio with the gateway as
its child process.

Usage: python3 client.py http URL TOKEN
       python3 client.py stdio COMMAND [ARG ...]
       python3 client.py listen URL TOKEN

Calls `append` twice (the second time with its set reordered and its
members in another order), then `count`, and prints one JSON object: the
protocol, the two results as JSON, and the count. `listen` instead
subscribes to changes of the tool list, calls `grow` (which adds `stamp`
upstream), and prints whether it was told and the tools it then lists.
"""

import asyncio
import json
import sys

import anyio

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def server():
    if sys.argv[1] in ("http", "listen"):
        url, token = sys.argv[2], sys.argv[3]
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return streamable_http_client(url, http_client=http)
    return StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])


def dump(result):
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def listen():
    async with Client(server()) as client:
        async with client.listen(tools_list_changed=True) as changes:
            await client.call_tool("grow", {})
            with anyio.fail_after(60):
                event = await changes.__anext__()
        tools = await client.list_tools()
        print(json.dumps({
            "told": type(event).__name__,
            "tools": sorted(tool.name for tool in tools.tools),
        }))


async def main():
    if sys.argv[1] == "listen":
        return await listen()
    async with Client(server()) as client:
        first = await client.call_tool("append", {"entry": "py", "tags": ["b", "a"]})
        again = await client.call_tool("append", {"tags": ["a", "b"], "entry": "py"})
        count = await client.call_tool("count", {})
        print(json.dumps({
            "protocol": client.protocol_version,
            "first": dump(first),
            "again": dump(again),
            "count": dump(count).get("structuredContent"),
        }))


asyncio.run(main())
