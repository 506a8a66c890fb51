from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from ninja import Router, Schema, Status

from approvals import audit, selectors

router = Router()


class EventOut(Schema):
    seq: int
    created_at: datetime
    actor: str
    action: str
    plan_id: int | None
    step_key: str
    data: dict[str, Any]
    prev_hash: str
    hash: str


class VerifyOut(Schema):
    ok: bool
    events: int
    first_bad: int | None
    reason: str


class HeadOut(Schema):
    seq: int
    hash: str
    mac: str
    exported_at: str


class Error(Schema):
    detail: Any


def _auditor(request) -> None:
    if not request.user.has_perm("approvals.view_auditevent"):
        raise PermissionDenied("Only auditors and administrators can read the audit trail.")


@router.get(
    "/audit",
    response={200: list[EventOut], 403: Error, 422: Error},
    summary="Audit events, oldest first (at most `limit`, from `after_seq`)",
)
def list_events(
    request,
    plan: int | None = None,
    actor: str = "",
    action: str = "",
    risk: str = "",
    since: str = "",
    until: str = "",
    q: str = "",
    after_seq: int = 0,
    limit: int = 500,
):
    _auditor(request)
    try:
        events = selectors.audit_events(plan=plan, actor=actor, action=action, risk=risk, since=since, until=until, q=q)
    except ValueError as error:
        return Status(422, {"detail": str(error)})
    rows = events.filter(seq__gt=after_seq)[: max(1, min(limit, 5000))]
    return [{**selectors._row(event), "created_at": event.created_at} for event in rows]


@router.get("/audit/verify", response={200: VerifyOut, 403: Error}, summary="Check the hash chain; names the first bad event")
def verify(request):
    _auditor(request)
    return audit.verify()


@router.post("/audit/verify", response={200: VerifyOut, 403: Error}, summary="Check the chain against a saved head export")
def verify_with_head(request, head: HeadOut):
    _auditor(request)
    return audit.verify(head=head.dict())


@router.get("/audit/head", response={200: HeadOut, 403: Error}, summary="The chain's head, signed with HMAC, to keep elsewhere")
def head(request):
    _auditor(request)
    return audit.export_head()
