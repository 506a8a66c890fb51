"""The audit trail: one unbroken chain under concurrent writers, tampering found at its exact seq,
append-only on PostgreSQL, signed head exports, history filters and streamed exports."""

import csv
import io
import json
import threading

import pytest
from django.db import connection, connections
from django.urls import reverse

from approvals import audit
from approvals.models import AuditEvent
from tests.conftest import make_user


def write_events(n: int, prefix: str = "test") -> None:
    for index in range(n):
        audit.record(action=f"{prefix}.event", plan_id=index % 3 + 1, data={"index": index, "risk": ["low", "medium", "high"][index % 3]})


def tamper(sql: str, params=()) -> None:
    """What someone with database access could do (on PostgreSQL they must disable the trigger first)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # A superuser's way around triggers for one session.
            cursor.execute("SET session_replication_role = replica")
        cursor.execute(sql, params)
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = DEFAULT")


def test_many_concurrent_writers_leave_one_unbroken_chain(transactional_db):
    errors = []

    def writer(number):
        try:
            write_events(25, prefix=f"writer{number}")
        except Exception as error:  # noqa: BLE001
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True)) == list(range(1, 201))
    assert audit.verify() == {"ok": True, "events": 200, "first_bad": None, "reason": ""}


def test_a_changed_row_is_reported_at_its_seq(db):
    write_events(6)
    tamper("UPDATE approvals_auditevent SET actor_name = 'mallory' WHERE seq = 4")
    report = audit.verify()
    assert (report["ok"], report["first_bad"]) == (False, 4) and "changed" in report["reason"]


def test_changed_data_is_reported_at_its_seq(db):
    write_events(6)
    event = AuditEvent.objects.get(seq=2)
    tamper("UPDATE approvals_auditevent SET data = %s WHERE seq = 2", [json.dumps({**event.data, "index": 99})])
    assert audit.verify()["first_bad"] == 2


def test_a_deleted_row_is_reported_at_its_seq(db):
    write_events(6)
    tamper("DELETE FROM approvals_auditevent WHERE seq = 3")
    report = audit.verify()
    assert report["first_bad"] == 3 and "missing" in report["reason"]


def test_reordered_rows_are_reported_at_the_first_moved_seq(db):
    write_events(6)
    tamper("UPDATE approvals_auditevent SET seq = 1000 WHERE seq = 5")
    tamper("UPDATE approvals_auditevent SET seq = 5 WHERE seq = 4")
    tamper("UPDATE approvals_auditevent SET seq = 4 WHERE seq = 1000")
    report = audit.verify()
    assert report["first_bad"] == 4 and "link" in report["reason"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the append-only trigger exists on PostgreSQL (CI runs it there)")
def test_postgresql_refuses_update_and_delete_on_the_trail(transactional_db):
    from django.db import DatabaseError, transaction

    write_events(2)
    for sql in ["UPDATE approvals_auditevent SET action = 'x' WHERE seq = 1", "DELETE FROM approvals_auditevent WHERE seq = 2"]:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
    assert AuditEvent.objects.count() == 2 and audit.verify()["ok"]


def test_a_signed_head_detects_a_truncated_tail(db):
    write_events(5)
    head = audit.export_head()
    assert head["seq"] == 5 and audit.verify(head=head)["ok"]
    write_events(2)
    assert audit.verify(head=head)["ok"], "events after the saved head are fine"
    tamper("DELETE FROM approvals_auditevent WHERE seq >= 4")
    report = audit.verify(head=head)
    assert report == {
        "ok": False,
        "events": 3,
        "first_bad": 4,
        "reason": "the trail ends at #3 but the saved head is #5: events were removed from the end",
    }
    forged = {**head, "seq": 3}
    assert "signature" in audit.verify(head=forged)["reason"]


def test_the_audit_verify_command_reads_a_saved_head(db, tmp_path):
    from django.core.management import CommandError, call_command

    write_events(3)
    saved = tmp_path / "head.json"
    out = io.StringIO()
    call_command("audit_head", stdout=out)
    saved.write_text(out.getvalue())
    call_command("audit_verify", "--head", str(saved), stdout=io.StringIO())
    tamper("DELETE FROM approvals_auditevent WHERE seq = 3")
    with pytest.raises(CommandError, match="broken at event #3"):
        call_command("audit_verify", "--head", str(saved))


@pytest.fixture
def auditor_client(client, db):
    client.force_login(make_user("carol", "auditor"))
    return client


def test_json_and_csv_exports_round_trip(auditor_client):
    write_events(7)
    exported = json.loads(b"".join(auditor_client.get(reverse("audit_export", args=["json"])).streaming_content))
    assert [row["seq"] for row in exported] == list(range(1, 8))
    for row in exported:
        recomputed = audit.event_hash(
            seq=row["seq"],
            created_at=row["created_at"],
            actor_name=row["actor"],
            action=row["action"],
            plan_id=row["plan_id"],
            step_key=row["step_key"],
            data=row["data"],
            prev_hash=row["prev_hash"],
        )
        assert recomputed == row["hash"], "an export can be verified on its own"
    response = auditor_client.get(reverse("audit_export", args=["csv"]) + "?plan=1")
    assert response.streaming and response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [int(r["seq"]) for r in rows] == [1, 4, 7] and json.loads(rows[0]["data"]) == {"index": 0, "risk": "low"}


def test_history_filters_and_paginates(auditor_client):
    write_events(60)
    audit.record(action="plan.approved", plan_id=9, step_key="s2", data={"comment": "looks right"})
    page = auditor_client.get(reverse("audit_history")).content.decode()
    assert "Page 1 of 2" in page and "61 events" in page
    filtered = auditor_client.get(reverse("audit_history") + "?q=looks+right").content.decode()
    assert "plan.approved" in filtered and "1 events" in filtered and 'href="/plans/9/#step-s2"' in filtered
    assert "20 events" in auditor_client.get(reverse("audit_history") + "?risk=high").content.decode()
    assert "20 events" in auditor_client.get(reverse("audit_history") + "?plan=2").content.decode()
    bad = auditor_client.get(reverse("audit_history") + "?since=yesterday")
    assert bad.status_code == 422 and "is not a date" in bad.content.decode()


def test_history_query_count_does_not_grow_with_events(auditor_client, django_assert_max_num_queries):
    from django.test.utils import CaptureQueriesContext

    write_events(3)
    with CaptureQueriesContext(connection) as few:
        auditor_client.get(reverse("audit_history"))
    write_events(120)
    with django_assert_max_num_queries(len(few)):
        auditor_client.get(reverse("audit_history"))


def test_operators_cannot_read_the_trail(alice_client):
    assert alice_client.get(reverse("audit_history")).status_code == 403
    assert alice_client.get(reverse("audit_export", args=["json"])).status_code == 403
    assert alice_client.get("/api/audit").status_code == 403


def test_the_api_lists_verifies_and_exports_the_head(auditor_client):
    write_events(4)
    events = auditor_client.get("/api/audit?plan=1").json()
    assert [e["seq"] for e in events] == [1, 4]
    assert auditor_client.get("/api/audit/verify").json() == {"ok": True, "events": 4, "first_bad": None, "reason": ""}
    head = auditor_client.get("/api/audit/head").json()
    assert auditor_client.post("/api/audit/verify", head, content_type="application/json").json()["ok"]
