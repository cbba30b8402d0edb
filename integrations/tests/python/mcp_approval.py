"""Approves and refuses refunds of integrations/examples/mcp_server.rs (a tool
with `approval = "ask"`) as the person at an MCP client would, with the
official MCP Python SDK, for tests/mcp.rs.

Usage: python3 mcp_approval.py URL MODE. MODE is "auto" (the SDK's default:
MCP 2026-07-28, where the server asks by `input_required`) or "legacy" (a
session, where it asks by `elicitation/create`). The person accepts a refund
of order "yes-*", declines one of "no-*", accepts one of "slow-*" once the
other of two identical calls was answered, and dismisses the rest. Prints
one JSON object: the protocol, the questions the person was asked, what
each call came to, how many refunds really ran, and what an answer
borrowed from another refund ("auto") or two identical calls at once
("legacy") came to.
"""

import asyncio
import json
import sys

from mcp import Client, types


def outcome(result):
    """What a tool call came to: its text, marked when an error."""
    data = result.model_dump(by_alias=True, mode="json")
    text = " ".join(c.get("text", "") for c in data.get("content", []))
    return {"error": text} if data.get("isError") else {"ok": text}


async def main(url, mode):
    questions = []

    released = asyncio.Event()

    async def person(context, params):
        """The person at the client: reads the question, and answers by the order."""
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

    report = {}
    async with Client(url, mode=mode, elicitation_callback=person) as client:
        calls = [
            ("approved", {"order_id": "yes-1", "amount": 500}),
            # The model calls again: replayed, and nobody is asked.
            ("approved_again", {"amount": 500, "order_id": "yes-1"}),
            # Other arguments are another operation, asked for on its own.
            ("other_amount", {"order_id": "yes-1", "amount": 900}),
            ("refused", {"order_id": "no-1", "amount": 700}),
            ("refused_again", {"order_id": "no-1", "amount": 700}),
            ("dismissed", {"order_id": "later-1", "amount": 300}),
        ]
        for name, arguments in calls:
            report[name] = outcome(await client.call_tool("refund", arguments))
            report[name]["asked"] = len(questions)
        count = await client.call_tool("refunds_made", {})
        report["protocol"] = client.protocol_version
        report["refunds"] = count.model_dump(mode="json")["content"][0]["text"]
        report["questions"] = questions
        if mode == "legacy":
            report["concurrent"] = await concurrent(client, released, questions)
        if mode == "auto":
            report["borrowed"] = await borrowed_answer(client)
    print(json.dumps(report))


async def borrowed_answer(client):
    """Answers the question about one refund, and brings that answer with a
    call of another: the answer must not be taken for it."""
    session = client.session
    asked = await session.call_tool(
        "refund", {"order_id": "yes-2", "amount": 100}, allow_input_required=True
    )
    (question_id,) = asked.input_requests
    accept = {question_id: {"action": "accept", "content": {}}}
    other = await session.call_tool(
        "refund",
        {"order_id": "yes-3", "amount": 100},
        input_responses=accept,
        request_state=asked.request_state,
        allow_input_required=True,
    )
    return {
        "first": type(asked).__name__,
        "other": type(other).__name__,
        "other_asks_about": [
            r.params.message for r in (getattr(other, "input_requests", None) or {}).values()
        ],
    }


async def concurrent(client, released, questions):
    """Two identical calls at once, on a session: the person is asked
    once (and answers only after the other call was answered), and one
    call runs."""
    asked_before = len(questions)

    async def call():
        result = await client.call_tool("refund", {"order_id": "slow-1", "amount": 1})
        released.set()
        return outcome(result)

    # A guard against a hang, should both calls ask: not a timing check.
    async with asyncio.timeout(120):
        results = await asyncio.gather(call(), call())
    return {"asked": len(questions) - asked_before, "results": results}


asyncio.run(main(sys.argv[1], sys.argv[2]))
