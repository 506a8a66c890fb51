"""The sandbox as a tool: a code plan is one step of this tool."""

from typing import Annotated

from django.conf import settings
from pydantic import Field

from core.risk import Risk
from sandbox import services as sandbox_services

from .registry import ToolError, tool


@tool(name="python_sandbox", risk=Risk.HIGH, idempotent=False, timeout_s=30)
def python_sandbox(
    code: Annotated[str, Field(min_length=1, max_length=50_000, description="Python that sets answer_text and STATUS")],
    tables: Annotated[list[str], Field(min_length=1, max_length=10)] = ["inventory", "transactions"],  # noqa: B006
    user_request: Annotated[str, Field(max_length=4000)] = "",
) -> dict:
    """Run LLM-written Python in the isolated sandbox against the data tables and apply its changes.
    In a code plan the approved dry-run diff is applied instead, so this only runs inside step plans."""
    dry_run = sandbox_services.dry_run_create(
        plan_id=0, revision=0, code=code, table_names=tables, user_request=user_request, timeout_s=settings.COUNTERSIGN_SANDBOX_TIMEOUT_S
    )
    if not dry_run.succeeded:
        raise ToolError(f"The code did not run cleanly ({dry_run.result.get('status')}): {dry_run.result.get('error')}")
    try:
        applied = sandbox_services.dry_run_apply(dry_run=dry_run)
    except sandbox_services.ApplyConflict as conflict:
        raise ToolError(str(conflict)) from conflict
    return {
        "answer_text": dry_run.result.get("answer_text", ""),
        "STATUS": dry_run.result.get("code_status", ""),
        "changes_applied": applied,
    }
