"""An audit append costs two statements on PostgreSQL (advance the head; insert the event and point the
head at it), and the event it returns is the row that was stored, so the chain still verifies."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import audit
from approvals.models import AuditEvent, AuditHead

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the two-statement append is PostgreSQL's")


def statements(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def test_an_audit_append_is_two_statements_and_the_chain_verifies(db):
    audit.record(action="test.first")
    with CaptureQueriesContext(connection) as captured:
        event = audit.record(action="test.second", plan_id=7, step_key="s1", data={"n": 1.5, "text": "é"})
    assert len(statements(captured)) == 2, "\n".join(statements(captured))
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.seq, stored.hash, stored.prev_hash, stored.data) == (event.seq, event.hash, event.prev_hash, {"n": 1.5, "text": "é"})
    assert AuditHead.objects.get(pk=1).hash == event.hash
    assert audit.verify() == {"ok": True, "events": 2, "first_bad": None, "reason": ""}
