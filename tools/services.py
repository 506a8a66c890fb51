"""Writes about tool sources: add one, sync its tools, override a tool's risk. Every change is audited."""

import re
import shlex
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from approvals import audit
from core.errors import ServiceError
from core.risk import Risk
from tools.catalogue import endpoint_of
from tools.definitions import assess
from tools.mcp_client import SourceUnavailable, runtime
from tools.models import HISTORY_LIMIT, ToolDefinition, ToolSource, definition_hash_of
from tools.registry import registry

SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,100}$")
MAX_FULL_NAME = 100


@dataclass
class SyncReport:
    source: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"source": self.source, "added": self.added, "changed": self.changed, "removed": self.removed, "unchanged": self.unchanged}


def parse_pairs(pairs: list[str], *, what: str, pattern: re.Pattern) -> dict[str, str]:
    """["K=V", ...] as a dict, refusing malformed names."""
    parsed = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not pattern.match(key):
            raise ServiceError(f"Write each {what} as NAME=VALUE; {key or pair!r} is not a valid name.", status=422)
        parsed[key] = value
    return parsed


def tool_source_create(
    *,
    actor,
    name: str,
    stdio: str = "",
    url: str = "",
    cwd: str = "",
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    trusted: bool = False,
    timeout_s: float = 30.0,
    sync: bool = True,
) -> tuple[ToolSource, SyncReport | None]:
    """Store a source and (by default) sync it at once. A failed first sync keeps the source, marked
    failed, so an admin can fix the server and sync again."""
    name = (name or "").strip()
    if not SOURCE_NAME.match(name):
        raise ServiceError("A source name is a lowercase slug (letters, digits, - and _), starting with a letter.", status=422)
    if bool(stdio) == bool(url):
        raise ServiceError("Give exactly one of a stdio command or an http URL.", status=422)
    if ToolSource.objects.filter(name=name).exists():
        raise ServiceError(f"A tool source named {name!r} already exists.", status=409)
    if not 1 <= timeout_s <= 600:
        raise ServiceError("The per-call timeout must be between 1 and 600 seconds.", status=422)
    source = ToolSource(name=name, trusted=trusted, timeout_s=timeout_s, created_by=actor)
    if stdio:
        try:
            source.command = shlex.split(stdio)
        except ValueError as error:
            raise ServiceError(f"The command line does not parse: {error}", status=422) from None
        source.transport, source.cwd, source.env = ToolSource.Transport.STDIO, cwd, _checked(env or {}, "environment variable", ENV_NAME)
        if not source.command:
            raise ServiceError("The stdio command is empty.", status=422)
    else:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ServiceError("The URL must be an absolute http:// or https:// URL.", status=422)
        source.transport, source.url, source.headers = ToolSource.Transport.HTTP, url, _checked(headers or {}, "header", HEADER_NAME)
    with transaction.atomic():
        source.save()
        audit.record(
            action="tool_source.added",
            actor=actor,
            data={
                "source": name,
                "transport": source.transport,
                "target": source.target,
                "trusted": trusted,
                "header_names": sorted(source.headers),
            },
        )
    report = tool_source_sync(source=source, actor=actor, raise_on_failure=False) if sync else None
    source.refresh_from_db()
    return source, report


def _checked(pairs: dict[str, str], what: str, pattern: re.Pattern) -> dict[str, str]:
    for key in pairs:
        if not pattern.match(key):
            raise ServiceError(f"{key!r} is not a valid {what} name.", status=422)
    return dict(pairs)


def tool_source_sync(*, source: ToolSource, actor, raise_on_failure: bool = True) -> SyncReport | None:
    """List the source's tools and store what changed: new tools, changed definitions (marked changed,
    with the earlier one kept for the diff and for pinned steps), and tools that disappeared."""
    try:
        listed = runtime.list_tools(endpoint_of(source), timeout=max(60.0, source.timeout_s))
    except SourceUnavailable as error:
        _sync_failed(source, actor, str(error))
        if raise_on_failure:
            raise ServiceError(f"Sync of {source.name!r} failed: {error}", status=502) from error
        return None
    report = SyncReport(source=source.name)
    with transaction.atomic():
        source = ToolSource.objects.select_for_update().get(pk=source.pk)
        existing = {row.name: row for row in source.tools.all()}
        seen = set()
        for tool in listed:
            full_name = f"{source.name}.{tool.name}"
            if len(full_name) > MAX_FULL_NAME or tool.name in seen:
                report.skipped.append(full_name[:120])
                continue
            seen.add(tool.name)
            _store_tool(source, existing.get(tool.name), tool, full_name, report)
        for name, row in existing.items():
            if name not in seen and row.status != ToolDefinition.Status.REMOVED:
                row.status, row.changed_at = ToolDefinition.Status.REMOVED, timezone.now()
                row.save(update_fields=["status", "changed_at", "updated_at"])
                report.removed.append(row.full_name)
        source.last_synced_at, source.last_sync_status, source.last_sync_error = timezone.now(), ToolSource.SyncStatus.OK, ""
        source.save(update_fields=["last_synced_at", "last_sync_status", "last_sync_error", "updated_at"])
        for full_name in report.changed:
            audit.record(action="tool.definition_changed", actor=actor, data={"tool": full_name, "source": source.name})
        audit.record(action="tool_source.synced", actor=actor, data=report.as_dict() | {"unchanged": len(report.unchanged)})
        transaction.on_commit(registry.invalidate)
    return report


def _store_tool(source: ToolSource, row: ToolDefinition | None, tool, full_name: str, report: SyncReport) -> None:
    definition = {"name": full_name, "description": tool.description, "input_schema": tool.input_schema, "annotations": tool.annotations}
    digest = definition_hash_of(definition)
    if row is None:
        row = ToolDefinition(source=source, name=tool.name, full_name=full_name)
        report.added.append(full_name)
    elif row.definition_hash == digest and row.status != ToolDefinition.Status.REMOVED:
        report.unchanged.append(full_name)
        _apply_assessment(row, source)
        row.save()
        return
    elif row.definition_hash == digest:
        row.status = ToolDefinition.Status.ACTIVE  # it came back unchanged
        report.added.append(full_name)
    else:
        row.previous_hash, row.status, row.changed_at = row.definition_hash, ToolDefinition.Status.CHANGED, timezone.now()
        report.changed.append(full_name)
    row.description, row.input_schema, row.annotations, row.definition_hash = tool.description, tool.input_schema, tool.annotations, digest
    history = {**row.history, digest: definition}
    row.history = dict(list(history.items())[-HISTORY_LIMIT:])
    _apply_assessment(row, source)
    row.save()


def _apply_assessment(row: ToolDefinition, source: ToolSource) -> None:
    verdict = assess(
        trusted=source.trusted,
        annotations=row.annotations,
        risk_override=row.risk_override,
        idempotent_override=row.idempotent_override,
        override_reason=row.override_reason,
    )
    row.risk, row.risk_reason, row.idempotent = verdict.risk, verdict.reason[:500], verdict.idempotent


def _sync_failed(source: ToolSource, actor, error: str) -> None:
    with transaction.atomic():
        ToolSource.objects.filter(pk=source.pk).update(
            last_synced_at=timezone.now(),
            last_sync_status=ToolSource.SyncStatus.FAILED,
            last_sync_error=error[:2000],
            updated_at=timezone.now(),
        )
        audit.record(action="tool_source.sync_failed", actor=actor, data={"source": source.name, "error": error[:2000]})
    source.refresh_from_db()


def tool_override(*, actor, tool_name: str, risk: str | None = None, idempotent: bool | None = None, reason: str) -> ToolDefinition:
    """An admin sets a tool's risk and/or idempotency. The reason is required, audited and shown."""
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError("Say why in a reason: it is shown as the tool's risk reason.", status=422)
    if risk is None and idempotent is None:
        raise ServiceError("Override the risk, idempotent, or both.", status=422)
    if risk is not None and risk not in Risk.values:
        raise ServiceError(f"Risk is one of {', '.join(Risk.values)}.", status=422)
    with transaction.atomic():
        row = ToolDefinition.objects.select_for_update().select_related("source").filter(full_name=tool_name).first()
        if row is None:
            builtin = registry.get(tool_name) is not None
            detail = "a built-in tool declares its tier in code" if builtin else "no such tool"
            raise ServiceError(f"{tool_name!r} cannot be overridden: {detail}.", status=404)
        before = {"risk": row.risk, "idempotent": row.idempotent, "reason": row.risk_reason}
        row.risk_override = risk if risk is not None else row.risk_override
        row.idempotent_override = idempotent if idempotent is not None else row.idempotent_override
        row.override_reason, row.override_by = reason[:500], actor
        _apply_assessment(row, row.source)
        row.save()
        audit.record(
            action="tool.overridden",
            actor=actor,
            data={"tool": tool_name, "before": before, "after": {"risk": row.risk, "idempotent": row.idempotent}, "reason": reason},
        )
        transaction.on_commit(registry.invalidate)
    return row
