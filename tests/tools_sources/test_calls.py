"""Calling MCP tools through the SDK client: outputs, errors, a dying server, the output cap."""

import pytest

from tools.registry import ToolError, registry


def test_structured_content_becomes_the_output_and_a_stdio_server_is_started_once(desk):
    assert registry.get("desk.read_ticket").call({"ticket_id": "T1"}) == {"id": "T1", "status": "open"}
    first = registry.get("desk.whoami").call({})
    assert registry.get("desk.whoami").call({}) == first


def test_an_is_error_result_fails_with_the_servers_text(desk):
    with pytest.raises(ToolError, match="ticket store offline while reading T9"):
        registry.get("desk.failing_lookup").call({"ticket_id": "T9"})


def test_a_server_that_dies_mid_call_fails_the_call_and_is_started_again(desk):
    before = registry.get("desk.whoami").call({})["pid"]
    with pytest.raises(ToolError, match="closed the connection during the call to `crash`"):
        registry.get("desk.crash").call({"ticket_id": "T1"})
    assert registry.get("desk.whoami").call({})["pid"] != before


def test_an_output_larger_than_the_cap_is_refused(desk, settings):
    settings.COUNTERSIGN_HTTP_MAX_BYTES = 1000
    with pytest.raises(ToolError, match="returned more than 1000 bytes"):
        registry.get("desk.huge_report").call({"size": 5000})


def test_arguments_are_checked_against_the_tools_schema_before_the_call(desk):
    with pytest.raises(Exception, match="ticket_id"):
        registry.get("desk.read_ticket").call({"ticket": "T1"})
