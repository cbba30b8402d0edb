"""Calls one tool once with the official MCP Python SDK's client, over
stdio with the server as its child process, and prints the result as JSON
(or the error the client raised, as {"error": ..}): how the SDK reads
what idem gateway answers, replays included.

Usage: python3 call.py TOOL ARGUMENTS_JSON COMMAND [ARG ...]
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main():
    tool, arguments = sys.argv[1], json.loads(sys.argv[2])
    server = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
    async with Client(server) as client:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as error:  # the SDK's refusal is what is reported
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
            return
        print(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True)))


asyncio.run(main())
