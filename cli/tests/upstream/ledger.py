"""An MCP server on the official Python SDK whose write tools append to a
ledger file, for cli/tests/gateway.rs: how many lines the ledger holds is
how many times a write ran.

Usage: python3 ledger.py LEDGER [--http PORT]. The ledger is a text file,
one line per write; `append_then_hang` writes this process's pid to
LEDGER.pid after its line, then waits until it is killed; `append_slowly`
writes its line, then waits until the call is cancelled (or an hour);
`append_confirmed` asks the client to confirm first (an elicitation: a
request mid-call on MCP 2025-11-25, an `input_required` result on
2026-07-28); `append_with_progress` reports progress before it writes;
`append_when_released` writes LEDGER.waiting, then its line once
LEDGER.release exists;
`append_keyed` writes the operation key the gateway sends in `_meta` (as a
server that passes it on downstream as an `Idempotency-Key` would);
`undocumented` is a write without a docstring; `wait_for_cancel`, a read, writes LEDGER.waiting, waits until its call
is cancelled and then writes LEDGER.cancelled; `grow` adds the write tool `stamp` and notifies a change of the tool list.
"""

import os
import sys
import time
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

LEDGER = sys.argv[1]

server = MCPServer("ledger")


def lines():
    try:
        with open(LEDGER) as f:
            return [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        return []


def write(line):
    with open(LEDGER, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


class Receipt(BaseModel):
    line: int
    entry: str


@server.tool()
def append(entry: str, amount: int = 0, tags: set[str] = frozenset()) -> Receipt:
    """Append an entry to the ledger."""
    write(f"{entry} {amount} {','.join(sorted(tags))}".rstrip())
    return Receipt(line=len(lines()), entry=entry)


NOTES = []


@server.tool()
def note(text: str) -> str:
    """Keep a note in memory: a write that costs next to nothing, for the
    gateway's overhead benchmark."""
    NOTES.append(text)
    return f"note {len(NOTES)}"


@server.tool()
def refuse(entry: str) -> str:
    """Refuse the entry: an error result, nothing written."""
    raise ToolError(f"the ledger refuses {entry}")


@server.tool()
def append_then_hang(entry: str) -> str:
    """Append an entry, then hang until killed."""
    write(entry)
    with open(LEDGER + ".pid", "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


@server.tool()
async def append_slowly(entry: str) -> str:
    """Append an entry, then wait until the call is cancelled."""
    write(f"slowly {entry}")
    await anyio.sleep(3600)
    return "done"


class Confirmation(BaseModel):
    confirm: bool


def confirmation(entry: str) -> Elicit[Confirmation]:
    return Elicit(f"Append {entry} to the ledger?", Confirmation)


@server.tool()
def append_confirmed(
    entry: str, confirmed: Annotated[Confirmation, Resolve(confirmation)]
) -> str:
    """Append an entry once the client confirms it."""
    if not confirmed.confirm:
        raise ToolError(f"{entry} was not confirmed")
    write(f"confirmed {entry}")
    return f"confirmed {entry}"


@server.tool()
async def append_with_progress(entry: str, ctx: Context) -> str:
    """Append an entry, reporting progress as it goes."""
    await ctx.report_progress(1, 2, "checking")
    await ctx.report_progress(2, 2, "writing")
    write(f"progress {entry}")
    return f"appended {entry}"


@server.tool()
async def append_when_released(entry: str) -> str:
    """Append an entry once the test releases it (LEDGER.waiting says it waits)."""
    with open(LEDGER + ".waiting", "w") as f:
        f.write(entry)
    while not os.path.exists(LEDGER + ".release"):
        await anyio.sleep(0.02)
    write(f"released {entry}")
    return f"released {entry}"


@server.tool()
def append_keyed(entry: str, ctx: Context) -> str:
    """Append an entry with the operation key the call carries."""
    meta = ctx.request_context.meta or {}
    key = meta.get("idem/key") if isinstance(meta, dict) else getattr(meta, "idem/key", None)
    write(f"keyed {entry} {key}")
    return f"keyed {entry}"


@server.tool()
def undocumented(entry: str) -> str:
    write(f"undocumented {entry}")
    return entry


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `stamp`, and tell the clients that listen."""

    def stamp(entry: str) -> str:
        """Stamp an entry into the ledger."""
        write(f"stamp {entry}")
        return "stamped"

    server.add_tool(stamp)
    # To the clients that subscribed (MCP 2026-07-28), and to this session,
    # on an older protocol.
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def wait_for_cancel() -> str:
    """Wait until the call is cancelled (LEDGER.waiting says it waits)."""
    with open(LEDGER + ".waiting", "w") as f:
        f.write("waiting")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        with open(LEDGER + ".cancelled", "w") as f:
            f.write("cancelled")
        raise
    return "not cancelled"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def count() -> int:
    """How many entries the ledger holds."""
    return len(lines())


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[2] == "--http":
        server.run("streamable-http", port=int(sys.argv[3]))
    else:
        server.run()
