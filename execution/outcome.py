"""How a finished run turned out. "Succeeded" means every step that was meant to run ran: a step skipped
because its condition was false was not meant to run (nor were steps skipped only because of it); a step
that was denied, skipped by a person, cancelled or blocked by one of those was meant to run and did not."""

from execution.transitions import S
from planning.models import Plan, Step

CONDITION_SKIP = "Skipped: condition"


def shortfall(steps: list[Step]) -> list[Step]:
    """The steps that were meant to run and did not, in plan order."""
    by_key = {step.key: step for step in steps}
    missed: dict[str, bool] = {}

    def was_missed(step: Step) -> bool:
        if step.key not in missed:
            missed[step.key] = False  # a cycle cannot occur in a validated plan; this guards the recursion
            if step.status in {S.FAILED, S.CANCELLED, S.INTERRUPTED}:
                missed[step.key] = True
            elif step.status == S.SKIPPED and not step.note.startswith(CONDITION_SKIP):
                blockers = [by_key[key] for key in step.depends_on if key in by_key and by_key[key].status != S.SUCCEEDED]
                # Skipped because a dependency did not run: missed only if that dependency was missed.
                missed[step.key] = not blockers or any(was_missed(blocker) for blocker in blockers)
        return missed[step.key]

    return [step for step in steps if was_missed(step)]


def outcome_of(steps: list[Step]) -> tuple[str, str]:
    """(plan status, one-line reason) for a run with no step left open."""
    missed = shortfall(steps)
    failed = [step for step in steps if step.status == S.FAILED]
    if not missed:
        return Plan.Status.SUCCEEDED, ""
    status = Plan.Status.FAILED if failed else Plan.Status.PARTIALLY_COMPLETED
    ran = len(steps) - len(missed)
    details = "; ".join(f"{step.key} {_why(step)}" for step in missed[:4]) + ("; …" if len(missed) > 4 else "")
    return status, f"{ran} of {len(steps)} steps done: {details}."[:300]


def _why(step: Step) -> str:
    text = step.note or step.error or step.get_status_display().lower()
    if text.startswith("Skipped: "):
        text = "skipped (" + text.removeprefix("Skipped: ").rstrip(".") + ")"
    return text.rstrip(".")[:120]
