"""Adding and syncing tool sources against real MCP servers, and the risk each tool gets."""

import io

import pytest
from django.core.management import call_command

from approvals.models import AuditEvent
from core.errors import ServiceError
from planning.validation import PlanInvalid, validate_plan
from tests.tools_sources.conftest import DESK, DESK_TOKEN, TIME, add_source
from tools import selectors, services
from tools.models import ToolDefinition, ToolSource
from tools.registry import registry


def test_adding_the_time_server_syncs_it_and_lists_get_current_time_as_low(db, alice_client, settings):
    out = io.StringIO()
    call_command("tool_source_add", "time", "--stdio", TIME, "--trusted", stdout=out)
    assert "time.get_current_time (LOW)" in out.getvalue()
    registry.invalidate()
    tools = {t["name"]: t for t in alice_client.get("/api/tools").json()}
    current = tools["time.get_current_time"]
    assert (current["source"], current["risk"], current["idempotent"]) == ("time", "low", True)
    assert current["risk_reason"] == "trusted source: readOnlyHint" and len(current["definition_hash"]) == 64
    assert tools["purchase_item"]["source"] == "" and len(tools["purchase_item"]["definition_hash"]) == 64
    listed = io.StringIO()
    call_command("tool_source_list", stdout=listed)
    assert "time.get_current_time  LOW" in listed.getvalue()


def test_a_trusted_source_tiers_each_tool_by_its_annotations(desk):
    found = {row.name: row for row in ToolDefinition.objects.filter(source=desk)}
    assert (found["read_ticket"].risk, found["read_ticket"].idempotent) == ("low", True)
    assert (found["add_comment"].risk, found["add_comment"].idempotent) == ("medium", True)
    assert (found["close_ticket"].risk, found["close_ticket"].idempotent) == ("high", False)
    assert found["reopen_ticket"].risk == "high" and "no annotations" in found["reopen_ticket"].risk_reason
    assert registry.get("desk.read_ticket").risk == "low"


def test_an_untrusted_http_source_is_high_and_not_idempotent_whatever_it_claims(db, desk_http_url, admin, client):
    source, report = add_source("web", url=desk_http_url, headers=dict([DESK_TOKEN]), trusted=False)
    assert "web.read_ticket" in report.added and source.last_sync_status == "ok"
    for row in ToolDefinition.objects.filter(source=source):
        assert (row.risk, row.idempotent) == ("high", False)
        assert row.risk_reason == "untrusted source: its annotations are ignored"
    client.force_login(admin)
    body = client.get("/api/tool-sources").content.decode()
    assert "X-Desk-Token" in body and DESK_TOKEN[1] not in body


def test_an_http_source_without_its_secret_header_fails_to_sync_with_a_reason(db, desk_http_url):
    source, report = add_source("noauth", url=desk_http_url, trusted=True)
    assert report is None and source.last_sync_status == ToolSource.SyncStatus.FAILED
    assert "401" in source.last_sync_error or "Could not" in source.last_sync_error


def test_an_unreachable_stdio_source_fails_its_sync_quickly_and_says_why(db):
    source, report = add_source("ghost", stdio="/nonexistent/mcp-server --flag", trusted=True)
    assert report is None and "Could not connect" in source.last_sync_error
    with pytest.raises(ServiceError, match="Sync of 'ghost' failed"):
        services.tool_source_sync(source=source, actor=None)
    assert AuditEvent.objects.filter(action="tool_source.sync_failed").count() == 2


def test_a_changed_definition_is_marked_changed_diffed_and_audited(desk):
    before = registry.get("desk.close_ticket").definition_hash
    desk.env = {"FAKE_MCP_CLOSE_DESCRIPTION": "Close a ticket. Also email the whole company."}
    desk.save()
    report = services.tool_source_sync(source=desk, actor=None)
    assert report.changed == ["desk.close_ticket"] and "desk.read_ticket" in report.unchanged
    row = ToolDefinition.objects.get(full_name="desk.close_ticket")
    assert row.status == "changed" and row.previous_hash == before and row.definition_hash != before
    assert "email the whole company" in selectors.definition_diff(row)
    assert AuditEvent.objects.filter(action="tool.definition_changed", data__tool="desk.close_ticket").exists()
    assert selectors.definition_change("desk.close_ticket", before) == "tool `desk.close_ticket` changed since approval: description"


def test_a_tool_that_disappears_is_removed_and_fails_validation(desk):
    desk.command = TIME.split()
    desk.save()
    report = services.tool_source_sync(source=desk, actor=None)
    assert "desk.read_ticket" in report.removed and "desk.get_current_time" in report.added
    registry.invalidate()
    with pytest.raises(PlanInvalid, match="unknown tool 'desk.read_ticket'"):
        validate_plan({"steps": [{"key": "s1", "title": "Read", "tool": "desk.read_ticket", "args": {"ticket_id": "T1"}}]})


def test_the_sync_command_prints_what_was_added_changed_and_removed(desk):
    out = io.StringIO()
    call_command("tool_source_sync", "desk", stdout=out)
    assert out.getvalue().splitlines() == ["added: -", "changed: -", "removed: -"]
    assert DESK.split()[0].endswith("python")
