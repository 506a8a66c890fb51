import json
import subprocess
import sys

import pytest
from django.urls import reverse

from planning.models import content_hash_of

STEP = {
    "key": "s1",
    "title": "Count open tickets",
    "description": "",
    "tool": "count_open_tickets",
    "args": {"queue": "support", "limit": 10},
    "depends_on": [],
    "condition": "",
    "success_criteria": "",
    "risk": "low",
}


def test_content_hash_ignores_key_order_and_whitespace():
    reordered = json.loads(json.dumps(dict(reversed(list(STEP.items())))))
    reordered["args"] = {"limit": 10, "queue": "support"}
    spaced = json.loads(json.dumps(STEP, indent=4))
    assert content_hash_of([STEP]) == content_hash_of([reordered]) == content_hash_of([spaced])


@pytest.mark.parametrize(
    "field, value",
    [
        ("key", "s9"),
        ("title", "Count closed tickets"),
        ("description", "now described"),
        ("tool", "get_sla_threshold"),
        ("args", {"queue": "billing", "limit": 10}),
        ("depends_on", ["s0"]),
        ("condition", "steps.s0.output > 1"),
        ("success_criteria", "a number"),
        ("risk", "high"),
    ],
)
def test_content_hash_changes_when_any_step_field_changes(field, value):
    assert content_hash_of([STEP]) != content_hash_of([{**STEP, field: value}])


def test_content_hash_changes_when_steps_are_reordered():
    other = {**STEP, "key": "s2"}
    assert content_hash_of([STEP, other]) != content_hash_of([other, STEP])


PAGES = ["inbox", "playbook_list"]


@pytest.mark.parametrize("name", PAGES)
def test_pages_redirect_anonymous_visitors_to_login(client, db, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_plan_page_and_goal_form_require_login(client, db):
    for response in [client.get("/plans/1/"), client.post("/goals/", {"text": "x"}), client.post("/plans/1/retry/")]:
        assert response.status_code == 302 and response.url.startswith("/login/")


def test_api_answers_401_in_json_to_anonymous_callers(client, db):
    response = client.get("/api/tools")
    assert response.status_code == 401
    assert "detail" in response.json()


def test_login_page_and_healthz_are_public(client, db):
    assert client.get(reverse("login")).status_code == 200
    assert client.get("/healthz").status_code in {200, 503}


def test_demo_user_can_log_in_with_printed_password(client, demo_data):
    from core.roles import DEMO_USERS

    username, _, password = next(u for u in DEMO_USERS if u[0] == "bob")
    response = client.post(reverse("login"), {"username": username, "password": password})
    assert response.status_code == 302
    assert client.get(reverse("inbox")).status_code == 200


def test_logout_ends_the_session(alice_client):
    alice_client.post(reverse("logout"))
    assert alice_client.get(reverse("inbox")).status_code == 302


def test_settings_refuse_to_start_without_secret_key_when_debug_is_off():
    env = {"PATH": "/usr/bin:/bin", "DEBUG": "false", "DJANGO_SETTINGS_MODULE": "project.settings"}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_check_deploy_reports_nothing_with_production_values():
    env = {
        "PATH": "/usr/bin:/bin",
        "DEBUG": "false",
        "SECRET_KEY": "x7Lq-9vR2mW8pZ4tK1nB6yH3cF5dJ0sA_gE-uI7oP2lM9qT4wX8zV1bN6rC3kY5h",
        "ALLOWED_HOSTS": "countersign.example.com",
        "COUNTERSIGN_HTTPS": "true",
        "DATABASE_URL": "sqlite:////tmp/countersign-deploy-check.sqlite3",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_missing_plans_and_forbidden_actions_get_readable_pages(client, carol):
    client.force_login(carol)
    missing = client.get("/plans/987654/")
    assert missing.status_code == 404 and "Nothing here" in missing.content.decode() and "Back to the inbox" in missing.content.decode()
    forbidden = client.post("/goals/", {"text": "x"})
    assert forbidden.status_code in {302, 403}
    refused = client.post("/plans/1/steps/s1/delete/", {"revision": 1})
    assert refused.status_code == 403 and "Only operators, and approvers during review, can edit plans." in refused.content.decode()
