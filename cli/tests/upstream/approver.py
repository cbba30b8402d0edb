"""The person at an MCP client, approving and refusing what `idem gateway`
asks about a tool with `approval = "ask"`, with the official MCP Python
SDK's client, for cli/tests/first_hour.rs.

Usage: python3 approver.py MODE COMMAND [ARG ...]: the gateway is started
as the client's child (stdio). MODE is "auto" (the SDK's default: MCP
2026-07-28, where the gateway asks by `input_required`) or "legacy" (a
session, where it asks by `elicitation/create`). The person accepts an
`append` of an entry "yes-*", declines one of "no-*" and dismisses the
rest. Prints one JSON object: the protocol, the questions asked, and what
each call came to.
"""

import asyncio
import json
import sys

from mcp import Client, types
from mcp.client.stdio import StdioServerParameters


def outcome(result):
    """What a tool call came to: its text, marked when an error."""
    data = result.model_dump(by_alias=True, mode="json")
    text = " ".join(c.get("text", "") for c in data.get("content", []))
    return {"error": text} if data.get("isError") else {"ok": text}


async def main(mode, command):
    questions = []

    async def person(context, params):
        questions.append(params.message)
        if '"yes-' in params.message:
            return types.ElicitResult(action="accept", content={})
        if '"no-' in params.message:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="cancel")

    server = StdioServerParameters(command=command[0], args=command[1:])
    report = {}
    async with Client(server, mode=mode, elicitation_callback=person) as client:
        calls = [
            ("approved", {"entry": "yes-1", "amount": 5}),
            ("approved_again", {"amount": 5, "entry": "yes-1"}),
            ("refused", {"entry": "no-1"}),
            ("refused_again", {"entry": "no-1"}),
            ("dismissed", {"entry": "later-1"}),
        ]
        for name, arguments in calls:
            report[name] = outcome(await client.call_tool("append", arguments))
            report[name]["asked"] = len(questions)
        report["protocol"] = client.protocol_version
        report["questions"] = questions
    print(json.dumps(report))


asyncio.run(main(sys.argv[1], sys.argv[2:]))
