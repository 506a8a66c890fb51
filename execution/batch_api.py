"""POST /api/gates/decisions: several gate decisions in one call, each refused or done on its own."""

from ninja import Router, Schema

from core.errors import ServiceError
from execution.batch import gate_decisions_record

router = Router()


class GateDecisionIn(Schema):
    plan_id: int
    step_key: str
    gate_hash: str
    approve: bool
    comment: str = ""


class GateDecisionOut(Schema):
    plan_id: int
    step_key: str
    ok: bool
    status: int
    detail: str


class Error(Schema):
    detail: str


@router.post(
    "/gates/decisions",
    response={200: list[GateDecisionOut], 403: Error, 422: Error},
    summary="Decide several runtime gates; a stale item is refused with its reason, the others go through",
)
def gate_decisions(request, decisions: list[GateDecisionIn]):
    if len(decisions) > 200:
        raise ServiceError("Decide at most 200 gates at once.", status=422)
    return gate_decisions_record(actor=request.user, decisions=[d.dict() for d in decisions])
