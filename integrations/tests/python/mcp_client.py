"""Drives integrations/examples/mcp_server.rs with the official MCP Python SDK in its
default mode (`mcp.Client(url)`: it negotiates the newest protocol, the
stateless MCP 2026-07-28 when the server offers it), for tests/mcp.rs.

Usage: python3 mcp_client.py URL. Prints one JSON object: the protocol
negotiated, the tools listed, and what a write called twice, a write in a
named run and the execution count came to.
"""

import asyncio
import json
import sys

from mcp import Client


def receipt(result):
    """The structured result of a tool call, or its text on error."""
    data = result.model_dump(by_alias=True, mode="json")
    if data.get("isError"):
        return {"error": [c.get("text") for c in data.get("content", [])]}
    return data.get("structuredContent")


async def main(url):
    async with Client(url) as client:
        tools = await client.list_tools()
        order = {"order_id": "o-1", "amount": 4200}
        first = await client.call_tool("charge_card", order)
        # The model repeats itself, members reordered.
        again = await client.call_tool("charge_card", {"amount": 4200, "order_id": "o-1"})
        count = await client.call_tool("charges_made", {})
        print(json.dumps({
            "protocol": client.protocol_version,
            "tools": sorted(tool.name for tool in tools.tools),
            "first": receipt(first),
            "again": receipt(again),
            "count": count.model_dump(mode="json")["content"][0]["text"],
        }))


asyncio.run(main(sys.argv[1]))
