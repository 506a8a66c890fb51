"""Reads about tools: who may manage sources, what changed in a definition, and the pin check a step
makes before it runs."""

import difflib
import json

from tools.models import ToolDefinition, ToolSource
from tools.registry import registry

PART_NAMES = {"name": "name", "description": "description", "input_schema": "schema", "annotations": "annotations"}


def can_manage_tools(user) -> bool:
    """Admins manage tool sources and overrides; everybody logged in reads the catalogue."""
    return bool(user and user.is_authenticated and user.has_perm("tools.change_toolsource"))


def sources() -> list[ToolSource]:
    return list(ToolSource.objects.all())


def definitions_by_name() -> dict[str, ToolDefinition]:
    return {row.full_name: row for row in ToolDefinition.objects.select_related("source", "override_by")}


def changed_parts(before: dict | None, after: dict) -> list[str]:
    if before is None:
        return ["definition"]
    return [label for key, label in PART_NAMES.items() if before.get(key) != after.get(key)]


def definition_diff(row: ToolDefinition) -> str:
    """A unified diff of the previous and current definition, for the Tools page."""
    before = row.previous_definition
    if before is None:
        return ""
    lines = [json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False).splitlines() for d in (before, row.definition())]
    return "\n".join(difflib.unified_diff(*lines, "approved before", "now", lineterm=""))


def definition_change(tool_name: str, pinned_hash: str) -> str | None:
    """Why a step that pinned `pinned_hash` for `tool_name` may not run now, or None. An MCP tool is read
    from its row (not from a process's cached registry), so another process's sync counts at once."""
    if not pinned_hash:
        return None  # steps stored before definitions were pinned
    builtin = registry.builtin(tool_name)
    if builtin is not None:
        # Checked on every claim and dispatch: the definition (a JSON schema built by pydantic, ≈ 1 ms) is
        # built only to say what changed.
        if builtin.definition_hash == pinned_hash:
            return None
        current, before = builtin.definition(), None
    else:
        row = ToolDefinition.objects.select_related("source").filter(full_name=tool_name).first()
        if row is None or row.status == ToolDefinition.Status.REMOVED or not row.source.enabled:
            return f"tool `{tool_name}` was removed since approval"
        if row.definition_hash == pinned_hash:
            return None
        current, before = row.definition(), row.history.get(pinned_hash)
    return f"tool `{tool_name}` changed since approval: {', '.join(changed_parts(before, current))}"
