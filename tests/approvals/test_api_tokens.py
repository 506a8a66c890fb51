"""API tokens expire, can be revoked (profile page or command line), and then get 401 from the API."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApiToken, AuditEvent
from approvals.tokens import token_issue

HTMX = {"HX-Request": "true"}


def bearer(raw: str) -> dict:
    return {"Authorization": f"Bearer {raw}"}


def issued(*args) -> str:
    out = io.StringIO()
    call_command("issue_token", *args, stdout=out)
    return out.getvalue().strip()


def test_an_issued_token_lasts_the_configured_days_and_records_its_use(alice, settings):
    settings.COUNTERSIGN_TOKEN_DAYS = 30
    raw = issued("alice", "--name", "deploy")
    token = ApiToken.objects.get(digest=ApiToken.digest_of(raw))
    assert token.name == "deploy" and abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    assert token.last_used_at is None
    assert Client().get("/api/tools", headers=bearer(raw)).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None
    assert AuditEvent.objects.filter(action="token.issued", data__name="deploy", data__user="alice").exists()


def test_days_on_the_command_line_override_the_default(alice):
    raw = issued("alice", "--days", "3")
    token = ApiToken.objects.get(digest=ApiToken.digest_of(raw))
    assert timedelta(days=2, hours=23) < token.expires_at - timezone.now() <= timedelta(days=3)


def test_an_expired_token_gets_401(alice):
    raw = issued("alice")
    ApiToken.objects.filter(digest=ApiToken.digest_of(raw)).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = Client().get("/api/tools", headers=bearer(raw))
    assert response.status_code == 401 and "Bearer" in response.json()["detail"]


def test_revoking_the_token_itself_on_the_command_line_gets_it_401(alice):
    raw = issued("alice")
    assert Client().get("/api/tools", headers=bearer(raw)).status_code == 200
    call_command("revoke_token", raw, stdout=io.StringIO())
    assert Client().get("/api/tools", headers=bearer(raw)).status_code == 401
    assert AuditEvent.objects.filter(action="token.revoked", data__user="alice").exists()


def test_revoking_by_user_and_name_revokes_only_that_label(alice):
    ci, laptop = issued("alice", "--name", "ci"), issued("alice", "--name", "laptop")
    call_command("revoke_token", "--user", "alice", "--name", "ci", stdout=io.StringIO())
    assert Client().get("/api/tools", headers=bearer(ci)).status_code == 401
    assert Client().get("/api/tools", headers=bearer(laptop)).status_code == 200


def test_revoke_token_explains_what_it_could_not_find(alice):
    with pytest.raises(CommandError, match="No such token"):
        call_command("revoke_token", "cs_not-a-token")
    with pytest.raises(CommandError, match="no live token named 'ci'"):
        call_command("revoke_token", "--user", "alice", "--name", "ci")
    with pytest.raises(CommandError, match="either the token"):
        call_command("revoke_token")


def test_the_profile_lists_only_my_tokens_with_their_state(alice_client, alice, bob):
    token_issue(user=alice, name="laptop")
    token_issue(user=bob, name="bobs-script")
    page = alice_client.get(reverse("profile")).content.decode()
    assert "laptop" in page and "bobs-script" not in page and "active" in page
    assert f'href="{reverse("profile")}"' in page, "the nav links to the profile"


def test_revoking_from_the_profile_swaps_the_row_and_the_token_gets_401(alice_client, alice):
    raw = token_issue(user=alice, name="laptop")
    token = ApiToken.objects.get(name="laptop")
    response = alice_client.post(reverse("token_revoke", args=[token.pk]), headers=HTMX)
    assert response.status_code == 200
    row = response.content.decode()
    assert row.lstrip().startswith(f'<tr id="token-{token.pk}"') and "revoked" in row and "Revoke laptop" not in row
    assert Client().get("/api/tools", headers=bearer(raw)).status_code == 401


def test_nobody_can_revoke_someone_elses_token(alice_client, bob):
    raw = token_issue(user=bob, name="bobs-script")
    token = ApiToken.objects.get(name="bobs-script")
    assert alice_client.post(reverse("token_revoke", args=[token.pk])).status_code == 404
    assert Client().get("/api/tools", headers=bearer(raw)).status_code == 200


def test_revoking_needs_the_csrf_token(alice):
    token_issue(user=alice, name="laptop")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("token_revoke", args=[ApiToken.objects.get().pk])).status_code == 403
    assert ApiToken.objects.get().revoked_at is None
