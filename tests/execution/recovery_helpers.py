"""Plans put straight into a running state, as a crash would leave them, for the recovery tests."""

from core.canonical import sha256_of
from planning.models import Plan, Step
from tests.fixtures.plans import approved_plan


def running_plan(people, steps, **statuses) -> Plan:
    """An approved plan marked running, each step in the status named for its key (pending otherwise)."""
    plan = approved_plan(people, steps)
    Plan.objects.filter(pk=plan.pk).update(status=Plan.Status.RUNNING, executing_hash=plan.content_hash)
    for row in Step.objects.filter(plan=plan):
        row.approved_hash = sha256_of(row.content())
        row.status = statuses.get(row.key, Step.Status.PENDING)
        row.resolved_args = row.args
        row.save()
    return Plan.objects.get(pk=plan.pk)


def steps_of(plan) -> dict[str, Step]:
    return {s.key: s for s in Step.objects.filter(plan=plan)}
