"""Deciding several runtime gates at once: each decision is bound to its own gate hash and goes through
gate_answer on its own (own transaction, own audit event); a refused one does not stop the others."""

from core.errors import ServiceError
from execution.gates import gate_answer
from planning.models import Plan


def gate_decisions_record(*, actor, decisions: list[dict]) -> list[dict]:
    """`decisions`: [{plan_id, step_key, gate_hash, approve, comment}]. Returns one outcome per item, in
    order: {plan_id, step_key, ok, status, detail}."""
    outcomes = []
    for decision in decisions:
        outcome = {"plan_id": decision["plan_id"], "step_key": decision["step_key"]}
        if not decision.get("gate_hash"):
            outcomes.append({**outcome, "ok": False, "status": 422, "detail": "Name the gate hash you decided on."})
            continue
        try:
            step = gate_answer(
                plan_id=decision["plan_id"],
                key=decision["step_key"],
                actor=actor,
                approve=bool(decision["approve"]),
                comment=decision.get("comment") or "",
                gate_hash=decision["gate_hash"],
            )
        except ServiceError as error:
            outcomes.append({**outcome, "ok": False, "status": error.status, "detail": error.message})
            continue
        except Plan.DoesNotExist:
            outcomes.append({**outcome, "ok": False, "status": 404, "detail": f"No plan {decision['plan_id']}."})
            continue
        verb = "approved" if decision["approve"] else "denied"
        outcomes.append({**outcome, "ok": True, "status": 200, "detail": f"Step {step.key} {verb}."})
    return outcomes
