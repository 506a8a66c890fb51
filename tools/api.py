"""The tool catalogue API (everybody logged in) and tool source management (admins)."""

from datetime import datetime
from typing import Any, Literal

from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import Router, Schema, Status
from pydantic import Field

from core.roles import user_can
from tools import selectors, services
from tools.models import ToolSource
from tools.registry import registry

router = Router()


class Error(Schema):
    detail: Any


class ToolOut(Schema):
    name: str
    description: str
    source: str
    risk: str
    risk_reason: str
    idempotent: bool
    timeout_s: float
    definition_hash: str
    args_schema: dict[str, Any]


class SourceOut(Schema):
    name: str
    transport: str
    target: str
    cwd: str
    env_names: list[str]
    header_names: list[str]
    trusted: bool
    enabled: bool
    timeout_s: float
    last_synced_at: datetime | None
    last_sync_status: str
    last_sync_error: str
    tools: list[str]


class SourceIn(Schema):
    name: str = Field(max_length=40)
    stdio: str = Field(default="", max_length=4000, description='Command line, e.g. ".venv/bin/python -m mcp_server_time"')
    url: str = Field(default="", max_length=2000)
    cwd: str = Field(default="", max_length=500)
    env: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict, description="Stored as secrets; only their names are ever shown")
    trusted: bool = False
    timeout_s: float = 30.0


class SyncOut(Schema):
    source: str
    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: list[str]


class CreatedOut(Schema):
    source: SourceOut
    sync: SyncOut | None


class OverrideIn(Schema):
    risk: Literal["low", "medium", "high"] | None = None
    idempotent: bool | None = None
    reason: str = Field(max_length=500)


def _admin(request) -> None:
    if not selectors.can_manage_tools(request.user):
        raise PermissionDenied("Only admins manage tool sources.")


def source_out(source: ToolSource) -> dict:
    return {
        "name": source.name,
        "transport": source.transport,
        "target": source.target,
        "cwd": source.cwd,
        "env_names": sorted(source.env),
        "header_names": sorted(source.headers),
        "trusted": source.trusted,
        "enabled": source.enabled,
        "timeout_s": source.timeout_s,
        "last_synced_at": source.last_synced_at,
        "last_sync_status": source.last_sync_status,
        "last_sync_error": source.last_sync_error,
        "tools": [tool.full_name for tool in source.tools.all()],
    }


def _source(name: str) -> ToolSource:
    source = ToolSource.objects.filter(name=name).first()
    if source is None:
        raise Http404(f"No tool source named {name!r}.")
    return source


@router.get("/tools", response={200: list[ToolOut], 403: Error}, summary="The tool catalogue with risk tiers and definition hashes")
def list_tools(request):
    # Every role reads the catalogue; an account with no role reads nothing here, as elsewhere.
    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view tools.")
    return [tool.catalogue_entry() for tool in registry.all()]


@router.patch("/tools/{tool_name}", response={200: ToolOut, 403: Error, 404: Error, 422: Error}, summary="Admin override of a tool's risk")
def override_tool(request, tool_name: str, payload: OverrideIn):
    _admin(request)
    services.tool_override(actor=request.user, tool_name=tool_name, risk=payload.risk, idempotent=payload.idempotent, reason=payload.reason)
    registry.refresh()
    return registry.get(tool_name).catalogue_entry()


@router.get("/tool-sources", response={200: list[SourceOut], 403: Error}, summary="Tool sources (header values are never shown)")
def list_sources(request):
    _admin(request)
    return [source_out(source) for source in ToolSource.objects.prefetch_related("tools")]


@router.post("/tool-sources", response={201: CreatedOut, 403: Error, 409: Error, 422: Error}, summary="Add a tool source and sync it")
def add_source(request, payload: SourceIn):
    _admin(request)
    source, report = services.tool_source_create(actor=request.user, **payload.dict())
    return Status(201, {"source": source_out(source), "sync": report.as_dict() if report else None})


@router.post("/tool-sources/{name}/sync", response={200: SyncOut, 403: Error, 404: Error, 502: Error}, summary="Sync a tool source")
def sync_source(request, name: str):
    _admin(request)
    return services.tool_source_sync(source=_source(name), actor=request.user).as_dict()
