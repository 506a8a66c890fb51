"""MCP tools as registry tools: loaded from the database, called through the MCP client.

Why a version check rather than loading in AppConfig.ready: ready() may run before the database exists
(migrate, collectstatic) and must not query it. The registry loads these tools on first use and, at the
start of every HTTP request and Celery task, compares one aggregate (count and latest change of the
tool rows) with what it loaded, reloading when another process synced, overrode or disabled something.
A sync in this process also invalidates at once. The pin check before a step runs reads the row itself,
so a stale cache can never let a changed definition run.
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, Max, Q

from core.canonical import canonical_json
from core.risk import Risk
from tools.definitions import args_model_from_schema
from tools.mcp_client import Endpoint, SourceUnavailable, ToolCallFailed, runtime
from tools.models import ToolDefinition, ToolSource
from tools.registry import Tool, ToolError

log = logging.getLogger(__name__)

LIVE = Q(source__enabled=True) & ~Q(status=ToolDefinition.Status.REMOVED)


def endpoint_of(source: ToolSource) -> Endpoint:
    return Endpoint(
        name=source.name,
        transport=source.transport,
        command=tuple(source.command),
        cwd=source.cwd,
        env=tuple(sorted(source.env.items())),
        url=source.url,
        headers=tuple(sorted(source.headers.items())),
    )


@dataclass(frozen=True, eq=False)
class McpTool(Tool):
    endpoint: Endpoint | None = None
    remote_name: str = ""
    input_schema: dict | None = None

    def args_schema(self) -> dict:
        return self.input_schema or {"type": "object", "properties": {}}

    def validate_args(self, args: dict) -> dict:
        # Only what the plan set is sent: filling in None for absent optional fields could change meaning.
        return self.args_model.model_validate(args).model_dump(exclude_unset=True)

    def call(self, args: dict) -> Any:
        try:
            output = runtime.call_tool(self.endpoint, self.remote_name, self.validate_args(args), timeout=self.timeout_s)
        except ToolCallFailed as error:
            raise ToolError(f"{self.name} failed: {error}") from error
        except SourceUnavailable as error:
            raise ToolError(str(error)) from error
        limit = settings.COUNTERSIGN_HTTP_MAX_BYTES
        if len(canonical_json(output).encode("utf-8")) > limit:
            raise ToolError(f"{self.name} returned more than {limit} bytes.")
        return output


def tool_from_row(row: ToolDefinition) -> McpTool:
    return McpTool(
        name=row.full_name,
        description=row.description,
        func=_not_local,
        args_model=args_model_from_schema(row.full_name.replace(".", "_"), row.input_schema),
        risk=Risk(row.risk),
        idempotent=row.idempotent,
        timeout_s=row.source.timeout_s,
        source=row.source.name,
        risk_reason=row.risk_reason,
        annotations=row.annotations,
        # MCP's openWorldHint defaults to true: only a trusted source's tool that says it is closed-world
        # returns trusted data.
        trusted_output=row.source.trusted and (row.annotations or {}).get("openWorldHint") is False,
        endpoint=endpoint_of(row.source),
        remote_name=row.name,
        input_schema=row.input_schema,
    )


def _not_local(**kwargs):
    raise ToolError("An MCP tool runs on its server.")


class DatabaseTools:
    """The registry's source of external tools: every live tool of an enabled source."""

    def version(self) -> str:
        try:
            found = ToolDefinition.objects.aggregate(count=Count("id"), latest=Max("updated_at"))
            sources = ToolSource.objects.aggregate(latest=Max("updated_at"))
        except DatabaseError:  # not migrated yet: no external tools
            return "unavailable"
        return f"{found['count']}:{found['latest']}:{sources['latest']}"

    def load(self) -> list[Tool]:
        try:
            rows = list(ToolDefinition.objects.filter(LIVE).select_related("source"))
        except DatabaseError:
            return []
        return [tool_from_row(row) for row in rows]
