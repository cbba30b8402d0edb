"""The person at an MCP client, approving and refusing what `idem gateway`
asks about a tool with `approval = "ask"`, with the official MCP Python
SDK's client, for cli/tests/first_hour.rs.

Usage: python3 approver.py MODE COMMAND [ARG ...]: the gateway is started
as the client's child (stdio). MODE is "auto" (the SDK's default: MCP
2026-07-28, where the gateway asks by `input_required`) or "legacy" (a
session, where it asks by `elicitation/create`). The person accepts an
`append` of an entry "yes-*", declines one of "no-*", accepts one of
"slow-*" once the other of two identical calls was answered ("legacy"), and
dismisses the rest. Prints one JSON object: the protocol, the questions asked, what
each call came to, and (in "auto") what an answer about one append,
brought with a call of another, came to.
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

    released = asyncio.Event()

    async def person(context, params):
        questions.append(params.message)
        if '"slow-' in params.message:
            # Answers once the duplicate of the call has been answered.
            await released.wait()
            return types.ElicitResult(action="accept", content={})
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
        if mode == "legacy":
            report["concurrent"] = await concurrent(client, released, questions)
        if mode == "auto":
            report["borrowed"] = await borrowed_answer(client)
    print(json.dumps(report))


async def borrowed_answer(client):
    """Answers the question about one append, and brings that answer with a
    call of another: the answer must not be taken for it."""
    session = client.session
    asked = await session.call_tool("append", {"entry": "yes-2"}, allow_input_required=True)
    (question_id,) = asked.input_requests
    other = await session.call_tool(
        "append",
        {"entry": "yes-3"},
        input_responses={question_id: {"action": "accept", "content": {}}},
        request_state=asked.request_state,
        allow_input_required=True,
    )
    return {"first": type(asked).__name__, "other": type(other).__name__}


async def concurrent(client, released, questions):
    """Two identical calls at once, on a session: the person is asked
    once (and answers only after the other call was answered), and one
    call runs."""
    asked_before = len(questions)

    async def call():
        result = await client.call_tool("append", {"entry": "slow-1"})
        released.set()
        return outcome(result)

    # A guard against a hang, should both calls ask: not a timing check.
    async with asyncio.timeout(120):
        results = await asyncio.gather(call(), call())
    return {"asked": len(questions) - asked_before, "results": results}


asyncio.run(main(sys.argv[1], sys.argv[2:]))
