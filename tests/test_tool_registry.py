from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from core.risk import Risk
from tools.registry import ToolRegistry, registry, tool


def test_a_tool_without_a_declared_tier_is_high():
    local = ToolRegistry()

    @tool(into=local)
    def delete_everything(confirm: bool) -> str:
        """Deletes everything."""
        return "gone"

    assert local.get("delete_everything").risk == Risk.HIGH


def test_argument_schema_comes_from_type_hints():
    local = ToolRegistry()

    @tool(into=local, risk=Risk.LOW, idempotent=True, timeout_s=3)
    def lookup(name: Annotated[str, Field(max_length=10)], limit: int = 5) -> list:
        """Look a name up.

        More text that is not part of the description."""
        return []

    registered = local.get("lookup")
    schema = registered.args_schema()
    assert schema["properties"]["name"]["type"] == "string" and schema["properties"]["name"]["maxLength"] == 10
    assert schema["properties"]["limit"]["default"] == 5
    assert schema["required"] == ["name"]
    assert registered.description == "Look a name up."
    assert (registered.idempotent, registered.timeout_s) == (True, 3)
    assert registered.validate_args({"name": "x"}) == {"name": "x", "limit": 5}
    with pytest.raises(ValidationError):
        registered.validate_args({"name": "x", "unexpected": 1})
    with pytest.raises(ValidationError):
        registered.validate_args({"limit": "many"})


def test_a_tool_without_type_hints_is_refused_at_registration():
    with pytest.raises(TypeError):

        @tool(into=ToolRegistry())
        def untyped(value):
            return value


def test_tools_can_be_registered_and_removed_at_run_time():
    @tool(name="runtime_probe", risk=Risk.MEDIUM)
    def runtime_probe(value: int) -> int:
        """Registered from outside."""
        return value

    try:
        assert registry.get("runtime_probe").risk == Risk.MEDIUM
        with pytest.raises(ValueError):
            tool(name="runtime_probe")(runtime_probe)
    finally:
        registry.unregister("runtime_probe")
    assert registry.get("runtime_probe") is None


def test_built_in_tools_carry_their_tiers():
    tiers = {t.name: t.risk for t in registry.all()}
    assert tiers["purchase_item"] == tiers["return_item"] == tiers["notify_on_call"] == tiers["send_email"] == Risk.HIGH
    assert tiers["http_get"] == Risk.MEDIUM
    assert tiers["search_inventory"] == tiers["get_item"] == tiers["count_open_tickets"] == tiers["get_sla_threshold"] == Risk.LOW
    assert tiers["llm_generate"] == Risk.LOW


def test_api_lists_tools_with_risk_and_schema(alice_client):
    tools = {t["name"]: t for t in alice_client.get("/api/tools").json()}
    assert tools["purchase_item"]["risk"] == "high" and tools["purchase_item"]["idempotent"] is False
    assert "quantity" in tools["purchase_item"]["args_schema"]["properties"]


def test_api_refuses_the_tool_list_to_a_user_without_a_role(client, nobody):
    client.force_login(nobody)
    response = client.get("/api/tools")
    assert response.status_code == 403 and response.json()["detail"]
