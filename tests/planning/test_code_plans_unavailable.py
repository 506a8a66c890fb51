"""When the kernel refuses the sandbox's namespaces, code plans are unavailable and the pages say so
(the refusal itself is proven against the real kernel in tests/sandbox)."""

from django.urls import reverse

from planning import table_views


def test_the_tables_page_says_code_plans_are_unavailable_and_why(alice_client, monkeypatch):
    monkeypatch.setattr(table_views, "unavailable_reason", lambda: "the kernel refused a user namespace")
    page = alice_client.get(reverse("tables")).content.decode()
    assert 'id="code-plans-unavailable"' in page and "the kernel refused a user namespace" in page


def test_the_tables_page_says_nothing_when_code_plans_can_run(alice_client):
    page = alice_client.get(reverse("tables")).content.decode()
    assert 'id="code-plans-unavailable"' not in page
