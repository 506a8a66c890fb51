"""PostgreSQL's jsonb rewrites numbers (1e+20 comes back as 100000000000000000000, -0.0 as 0.0): an event's
hash must still verify when recomputed from the row as stored."""

import math

import pytest

from approvals import audit
from approvals.models import AuditEvent


@pytest.mark.parametrize(
    "value",
    [1e20, 1.2345678901234568e17, -0.0, 1.0, 1.5e-7, 0.30000000000000004, 10**30, [1e16, {"deep": 2.5e300}]],
    ids=repr,
)
def test_an_event_with_numbers_jsonb_normalises_still_verifies(db, value):
    audit.record(action="test.numbers", data={"value": value})
    assert audit.verify()["ok"], audit.verify()


def test_the_stored_data_is_what_was_hashed(db):
    event = audit.record(action="test.numbers", data={"big": 1e20, "zero": -0.0})
    stored = AuditEvent.objects.get(pk=event.pk)
    assert stored.data == event.data == {"big": 10**20, "zero": 0.0}


def test_numbers_json_cannot_hold_are_recorded_as_text_instead_of_failing(db):
    event = audit.record(action="test.numbers", data={"nan": math.nan, "inf": math.inf, "minus_inf": -math.inf})
    assert AuditEvent.objects.get(pk=event.pk).data == {"nan": "NaN", "inf": "Infinity", "minus_inf": "-Infinity"}
    assert audit.verify()["ok"]
