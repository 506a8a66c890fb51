"""An MCP server for tests, written with the mcp SDK: a ticket desk whose tools carry every kind of
annotation (read-only, non-destructive write, destructive, none) plus tools that misbehave.

    python -m tests.fakes.mcp_server                 # stdio
    python -m tests.fakes.mcp_server --http PORT     # Streamable HTTP on 127.0.0.1:PORT/mcp

FAKE_MCP_CLOSE_DESCRIPTION, when set, replaces close_ticket's description: a test changes it between
two syncs to play a server that rewrites a tool after its plan was approved.
FAKE_MCP_REQUIRE_HEADER=NAME:VALUE makes the HTTP server refuse requests without that header.
"""

import argparse
import os
import sys
from typing import Annotated, TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer("countersign-test-desk")
TICKETS = {"T1": {"id": "T1", "title": "Printer on fire", "status": "open"}, "T2": {"id": "T2", "title": "VPN down", "status": "open"}}
TicketId = Annotated[str, Field(description="Ticket id, e.g. T1")]


class Ticket(TypedDict):
    id: str
    status: str


class Process(TypedDict):
    pid: int


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def read_ticket(ticket_id: TicketId) -> Ticket:
    """Read one ticket."""
    ticket = TICKETS.get(ticket_id, {"id": ticket_id, "status": "missing"})
    return {"id": ticket["id"], "status": ticket["status"]}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
def add_comment(ticket_id: TicketId, text: Annotated[str, Field(max_length=500)]) -> str:
    """Add a comment to a ticket."""
    return f"Comment added to {ticket_id}: {text}"


@server.tool(
    description=os.environ.get("FAKE_MCP_CLOSE_DESCRIPTION", "Close a ticket for good."),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
)
def close_ticket(ticket_id: TicketId) -> Ticket:
    return {"id": ticket_id, "status": "closed"}


@server.tool()
def reopen_ticket(ticket_id: TicketId) -> Ticket:
    """Reopen a ticket (no annotations at all)."""
    return {"id": ticket_id, "status": "open"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def failing_lookup(ticket_id: TicketId) -> dict:
    """A read that the server answers with an error."""
    raise ToolError(f"ticket store offline while reading {ticket_id}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash(ticket_id: TicketId) -> dict:
    """The server process dies in the middle of this call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def huge_report(size: Annotated[int, Field(ge=1, le=5_000_000)]) -> str:
    """Returns `size` characters."""
    return "x" * size


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami() -> Process:
    """The server's process id (tests check that a stdio server is started once per process)."""
    return {"pid": os.getpid()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="Serve Streamable HTTP on this port instead of stdio")
    options = parser.parse_args()
    if options.http is None:
        server.run()
        return
    import uvicorn  # only the HTTP variant needs it

    app = server.streamable_http_app(host="127.0.0.1")
    required = os.environ.get("FAKE_MCP_REQUIRE_HEADER")
    if required:
        app = _require_header(app, *required.split(":", 1))
    uvicorn.run(app, host="127.0.0.1", port=options.http, log_level="warning")


def _require_header(app, name: str, value: str):
    wanted = (name.lower().encode(), value.encode())

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and wanted not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing credentials"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    main()
