"""Every change of a step's status goes through `step_transition`: it checks the move against the table
below, saves the step, records the audit event and announces the change to the plan's live page, so
"save + audit + announce" is written once and an illegal move is an error rather than a silent write.
The caller holds the step's row lock (and the plan's, where it dispatches)."""

from collections.abc import Callable

from django.utils import timezone

from approvals import audit
from planning import broadcast
from planning.models import Step

S = Step.Status
OPEN = {S.PENDING, S.WAITING_APPROVAL, S.QUEUED, S.RUNNING, S.INTERRUPTED}
DONE = {S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED}

# from-status -> the statuses a step may move to from there. Terminal statuses go nowhere: a new run of
# a failed step is a new revision (new rows), never a rewrite of the old one.
ALLOWED: dict[str, frozenset[str]] = {
    # prepared by a dispatch: skipped (blocked, condition false), failed (could not prepare), gated,
    # queued, cancelled; a code plan's single step is applied, not run, so it succeeds from pending.
    S.PENDING: frozenset({S.PENDING, S.SKIPPED, S.FAILED, S.WAITING_APPROVAL, S.QUEUED, S.CANCELLED, S.SUCCEEDED}),
    S.WAITING_APPROVAL: frozenset({S.QUEUED, S.SKIPPED, S.CANCELLED}),
    # claimed (running), refused at the claim (failed, interrupted), requeued past its deadline, cancelled
    S.QUEUED: frozenset({S.RUNNING, S.FAILED, S.INTERRUPTED, S.QUEUED, S.CANCELLED}),
    # finished, retried (idempotent: queued again or a redelivery claims a new attempt), interrupted
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.QUEUED, S.RUNNING, S.INTERRUPTED}),
    # a person retries (queued; a HIGH step waits at a new runtime gate for the new attempt) or skips it
    S.INTERRUPTED: frozenset({S.QUEUED, S.WAITING_APPROVAL, S.SKIPPED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.SKIPPED: frozenset(),
    S.CANCELLED: frozenset(),
}

# The audit action each arrival records unless the caller names another (None: no event of its own).
ACTIONS = {
    S.SUCCEEDED: "step.succeeded",
    S.FAILED: "step.failed",
    S.SKIPPED: "step.skipped",
    S.CANCELLED: "step.cancelled",
    S.INTERRUPTED: "step.interrupted",
    S.RUNNING: "step.started",
    S.WAITING_APPROVAL: "gate.opened",
    S.QUEUED: None,
    S.PENDING: None,
}


class IllegalTransition(Exception):
    """A bug: some code tried to move a step where the table does not allow it."""


class WriteRefused(Exception):
    """A caller's own write found its condition gone: the step moved since it was read without a lock,
    or the attempt it was to start had started already. The statement ran without error but changed
    nothing, and nothing was recorded, so the caller's transaction may go on and decide again."""


def check_transition(step: Step, to: str) -> None:
    if to not in ALLOWED[step.status]:
        raise IllegalTransition(f"Step {step.key} of plan {step.plan_id} cannot go from {step.status} to {to}.")


def step_transition(
    step: Step,
    to: str,
    *,
    fields: dict | None = None,
    action: str | None = "",
    data: dict | None = None,
    actor=None,
    log: str | None = None,
    write: Callable[[Step, dict], bool] | None = None,
) -> Step:
    """Move `step` to status `to`, setting `fields` on it as well. `action` overrides the audit action
    (None: record nothing); `data` is added to the event; `log` is the live page's activity line.
    `write(step, values)` stores the changed columns instead of `save()`: a caller that writes another
    row in the same statement, or writes only on a condition (the row still in the status it read
    without a lock); it returns False when it wrote nothing, which raises WriteRefused before anything
    is recorded."""
    check_transition(step, to)
    fields = dict(fields or {})
    if to in DONE:
        fields.setdefault("finished_at", timezone.now())
    step.status = to
    for name, value in fields.items():
        setattr(step, name, value)
    if write is None:
        step.save(update_fields=["status", *fields])
    elif not write(step, {"status": to, **fields}):
        raise WriteRefused(f"Step {step.key} of plan {step.plan_id} was not moved to {to}: its write's condition no longer held.")
    action = ACTIONS[to] if action == "" else action
    if action:
        audit.record(action=action, actor=actor, plan_id=step.plan_id, step_key=step.key, data={"risk": step.risk, **(data or {})})
    broadcast.announce(step.plan_id, steps=[step.key], log=log)
    return step


def step_finish(step: Step, to: str, *, note: str = "", error: str = "", output=None, actor=None, write=None) -> Step:
    """A step arrives at a terminal status with its note or error (and output, when it succeeded)."""
    fields = {"note": note[:300], "error": error}
    if output is not None:
        fields["output"] = output
    line = f"{step.key} {S(to).label.lower()}" + (f": {note or error}" if note or error else ".")
    data = {"note": note[:300], "error": error[:2000]}
    return step_transition(step, to, fields=fields, data=data, actor=actor, log=line, write=write)


def step_interrupt(step: Step, *, note: str, reason: str, data: dict | None = None) -> Step:
    """The one way a step becomes interrupted: it may or may not have run, so a person decides."""
    return step_transition(step, S.INTERRUPTED, fields={"note": note}, data={**(data or {})}, log=f"{step.key} interrupted: {reason}.")
