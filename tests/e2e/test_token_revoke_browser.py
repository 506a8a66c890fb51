"""Alice finds her API tokens from the nav, revokes one after confirming, and the API refuses it at once."""

import pytest
from django.test import Client
from playwright.sync_api import expect

from approvals.tokens import token_issue
from tests.conftest import make_user

pytestmark = pytest.mark.e2e


def test_revoking_a_token_on_the_profile_page(transactional_db, new_page):
    alice = make_user("alice", "operator")
    alice.set_password("e2e-pass-123")
    alice.save()
    laptop, ci = token_issue(user=alice, name="laptop"), token_issue(user=alice, name="ci")
    page = new_page("alice", "e2e-pass-123")
    dialogs = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Profile").click()
    expect(page.get_by_role("heading", name="API tokens")).to_be_visible()
    page.get_by_role("button", name="Revoke laptop").click()
    row = page.locator("tr", has_text="laptop")
    expect(row.get_by_text("revoked", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Revoke laptop")).to_have_count(0)
    assert dialogs and "laptop" in dialogs[0], "the revoke asked for confirmation first"
    assert Client().get("/api/tools", headers={"Authorization": f"Bearer {laptop}"}).status_code == 401
    assert Client().get("/api/tools", headers={"Authorization": f"Bearer {ci}"}).status_code == 200
