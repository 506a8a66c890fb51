"""Standing grants: an approver pre-approves a narrow class of calls (one tool, arguments matching a
predicate) for a number of uses and/or until a time. A gate a live grant covers is decided by it."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from approvals import audit
from approvals.models import StandingGrant
from core.errors import ServiceError
from core.roles import user_can

BOUNDS = {"min", "max"}


def predicate_problems(predicate) -> list[str]:
    """Why `predicate` is not {argument: {"equals": value}} or {argument: {"min": n, "max": n}}."""
    if not isinstance(predicate, dict):
        return ["The predicate must map argument names to conditions."]
    problems = []
    for name, condition in predicate.items():
        if not isinstance(condition, dict) or not condition:
            problems.append(f"{name}: give {{'equals': value}} or numeric bounds {{'min': n, 'max': n}}.")
        elif set(condition) == {"equals"}:
            continue
        elif not set(condition) <= BOUNDS or not all(_is_number(v) for v in condition.values()):
            problems.append(f"{name}: bounds are 'min' and/or 'max', each a number.")
    return problems


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def predicate_matches(predicate: dict, args: dict) -> bool:
    for name, condition in predicate.items():
        value = args.get(name)
        if "equals" in condition:
            if value != condition["equals"]:
                return False
        elif not _is_number(value) or value < condition.get("min", value) or value > condition.get("max", value):
            return False
    return True


def grant_create(
    *, actor, tool: str, predicate: dict, max_uses: int | None = None, expires_at: datetime | None = None, reason: str = ""
) -> StandingGrant:
    if not user_can(actor, "approve"):
        raise ServiceError("Only approvers can grant standing approvals.", status=403)
    if not tool:
        raise ServiceError("Name the tool the grant covers.", status=422)
    problems = predicate_problems(predicate)
    if problems:
        raise ServiceError(" ".join(problems), status=422)
    if max_uses is None and expires_at is None:
        raise ServiceError("A grant needs a limit: a number of uses, an expiry time, or both.", status=422)
    if max_uses is not None and max_uses < 1:
        raise ServiceError("The number of uses must be at least 1.", status=422)
    if expires_at is not None and expires_at <= timezone.now():
        raise ServiceError("The expiry time is already past.", status=422)
    with transaction.atomic():
        grant = StandingGrant.objects.create(
            tool=tool, predicate=predicate, max_uses=max_uses, expires_at=expires_at, reason=reason[:500], created_by=actor
        )
        audit.record(action="grant.created", actor=actor, data=grant_summary(grant))
    return grant


def grant_revoke(*, grant_id: int, actor) -> StandingGrant:
    if not user_can(actor, "approve"):
        raise ServiceError("Only approvers can revoke standing approvals.", status=403)
    with transaction.atomic():
        grant = StandingGrant.objects.select_for_update().filter(pk=grant_id).first()
        if grant is None:
            raise ServiceError(f"No grant #{grant_id}.", status=404)
        if grant.revoked_at is not None:
            raise ServiceError(f"Grant #{grant_id} is already revoked.", status=409)
        grant.revoked_at, grant.revoked_by = timezone.now(), actor
        grant.save(update_fields=["revoked_at", "revoked_by"])
        audit.record(action="grant.revoked", actor=actor, data=grant_summary(grant))
    return grant


def grant_use(*, tool: str, args: dict, excluded_user_ids: set[int]) -> StandingGrant | None:
    """Take one use of the oldest live grant covering this call, or None. Rows are locked, so two gates
    never spend the grant's last use twice. Grants by `excluded_user_ids` (four-eyes) do not apply.
    The caller holds a transaction and records the decision."""
    now = timezone.now()
    candidates = StandingGrant.objects.select_for_update().filter(tool=tool, revoked_at__isnull=True).order_by("created_at")
    for grant in candidates:
        if grant.created_by_id in excluded_user_ids or grant.state(now) != "live" or not predicate_matches(grant.predicate, args):
            continue
        grant.uses += 1
        grant.save(update_fields=["uses"])
        return grant
    return None


def grant_summary(grant: StandingGrant) -> dict:
    return {
        "grant_id": grant.pk,
        "tool": grant.tool,
        "predicate": grant.predicate,
        "max_uses": grant.max_uses,
        "uses": grant.uses,
        "uses_left": grant.uses_left,
        "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
        "reason": grant.reason,
        "created_by": grant.created_by.get_username(),
        "state": grant.state(),
    }
