"""A NUL byte in an address is a clear 400, never a database error (PostgreSQL cannot store NUL)."""

from approvals.models import ApiToken
from tests.conftest import make_user


def test_a_nul_in_an_api_path_is_refused_with_400(client, db):
    alice = make_user("alice", "operator")
    response = client.get("/api/plans/1/steps/%00", headers={"Authorization": f"Bearer {ApiToken.issue(user=alice)}"})
    assert response.status_code == 400 and "NUL" in response.json()["detail"]


def test_a_nul_in_a_query_string_is_refused_with_400(client, db):
    client.force_login(make_user("carol", "auditor"))
    response = client.get("/audit/?action=plan%00.approved")
    assert response.status_code == 400


def test_an_ordinary_address_still_works(client, db):
    client.force_login(make_user("carol", "auditor"))
    assert client.get("/audit/?action=plan.approved").status_code == 200
