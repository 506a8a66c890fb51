"""Thin Celery tasks: load by id, call a service. Queued with transaction.on_commit by the services."""

from celery import shared_task

from planning import aftermath, codeplans, executor, services


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330)
def plan_generate_task(plan_id: int) -> str:
    return services.plan_generate(plan_id=plan_id).status


@shared_task(acks_late=True)
def execute_step_task(step_id: int) -> str:
    # Time limits are set per call from the tool's timeout (executor._queue).
    return executor.execute_step(step_id)


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330)
def replan_task(plan_id: int) -> str:
    return aftermath.replan(plan_id).status


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def compose_answer_task(plan_id: int) -> None:
    aftermath.compose_answer(plan_id)


@shared_task(soft_time_limit=60, time_limit=90)
def reconcile_task() -> dict:
    return executor.reconcile()


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def code_dry_run_task(plan_id: int) -> str | None:
    result = codeplans.dry_run(plan_id)
    return result.result.get("status") if result else None
