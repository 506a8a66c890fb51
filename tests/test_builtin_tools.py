import pytest
from django.core import mail

from sandbox.models import DataRow
from tools.registry import ToolError, registry


def call(name, **args):
    return registry.get(name).call(args)


def rows(table):
    return [r.data for r in DataRow.objects.filter(table__name=table).order_by("id")]


def stock(item_id):
    return DataRow.objects.get(table__name="inventory", key=item_id).data["quantity_in_stock"]


def test_search_finds_round_frames_under_100_by_whole_word(demo_data):
    result = call("search_inventory", keywords=["round"], max_price=100)
    assert [item["name"] for item in result["items"]] == ["Classic"]
    assert result["items"][0]["price"] == 60


def test_search_can_include_items_out_of_stock(demo_data):
    names = {i["name"] for i in call("search_inventory", keywords=["cat-eye"], in_stock_only=False)["items"]}
    assert names == {"Catseye"}
    assert call("search_inventory", keywords=["cat-eye"])["count"] == 0


def test_purchase_lowers_stock_and_writes_one_row_with_the_running_balance(demo_data):
    result = call("purchase_item", item="Wayfarer", quantity=3, customer_name="Alice")
    assert stock("SG002") == 12
    transactions = rows("transactions")
    assert len(transactions) == 2
    assert transactions[-1]["transaction_amount"] == 285 and transactions[-1]["balance_after_transaction"] == 785
    assert result["transaction_id"] == "TXN002" and result["customer_name"] == "Alice"


def test_two_purchases_have_sequential_balances(demo_data):
    call("purchase_item", item="Classic", quantity=3)
    call("purchase_item", item="SG001", quantity=1)
    assert [t["balance_after_transaction"] for t in rows("transactions")] == [500, 680, 760]


def test_purchase_beyond_stock_changes_nothing(demo_data):
    with pytest.raises(ToolError, match="Insufficient stock"):
        call("purchase_item", item="Moon", quantity=7)
    assert stock("SG003") == 6 and len(rows("transactions")) == 1


def test_return_raises_stock_and_writes_a_refund_row(demo_data):
    call("return_item", item="Aviator", quantity=2)
    assert stock("SG001") == 25
    assert rows("transactions")[-1]["transaction_amount"] == -160
    assert rows("transactions")[-1]["balance_after_transaction"] == 340


def test_unknown_item_is_a_readable_error(demo_data):
    with pytest.raises(ToolError, match="No inventory item matches"):
        call("get_item", item="Monocle")


def test_on_call_desk_reads_counts_and_threshold(demo_data):
    assert call("count_open_tickets", queue="support") == 12
    assert call("get_sla_threshold", queue="support") == 10
    with pytest.raises(ToolError):
        call("get_sla_threshold", queue="nonexistent")


def test_notify_on_call_sends_email_and_records_it(demo_data):
    record = call("notify_on_call", message="SLA breached: 12 > 10", severity="critical")
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["dana.oncall@example.com"]
    assert "[CRITICAL]" in mail.outbox[0].subject
    assert rows("notifications") == [record]


def test_http_get_refuses_hosts_outside_the_allowlist(settings):
    settings.COUNTERSIGN_HTTP_ALLOWLIST = ["example.org"]
    with pytest.raises(ToolError, match="not in COUNTERSIGN_HTTP_ALLOWLIST"):
        call("http_get", url="http://127.0.0.1:6379/")
    with pytest.raises(ToolError, match="http"):
        call("http_get", url="file:///etc/passwd")


def test_http_get_fetches_from_an_allowed_host_and_caps_the_size(settings, fake_openai_server):
    settings.COUNTERSIGN_HTTP_ALLOWLIST = ["127.0.0.1"]
    result = call("http_get", url=fake_openai_server.base_url + "/models")
    assert result["status"] == 200 and "fake-model" in result["text"]
    settings.COUNTERSIGN_HTTP_MAX_BYTES = 10
    with pytest.raises(ToolError, match="more than 10 bytes"):
        call("http_get", url=fake_openai_server.base_url + "/models")
    with pytest.raises(ToolError, match="HTTP 404"):
        call("http_get", url=fake_openai_server.base_url + "/nothing-here")


def test_llm_generate_without_an_llm_is_a_clear_error(no_llm):
    with pytest.raises(ToolError, match="No LLM is configured"):
        call("llm_generate", prompt="Summarise")


def test_llm_generate_returns_the_model_text(fake_openai):
    fake_openai.reply("A short summary.")
    assert call("llm_generate", prompt="Summarise") == "A short summary."
