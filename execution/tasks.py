"""Thin Celery tasks: load by id, call a service. Services queue them by name (core.jobs.enqueue).

The names keep their wave-1 module path (`planning.tasks.…`) so messages already queued, the task
routes and the beat schedule in settings survive the move of these tasks into this app.
"""

from celery import shared_task

from execution import aftermath, reconcile, worker


@shared_task(name="planning.tasks.execute_step_task", acks_late=True)
def execute_step_task(step_id: int, token: int | None = None) -> str:
    # Time limits are set per call from the tool's timeout (engine.queue_step). `token` names the
    # queueing the message was sent for (absent in messages queued before it existed).
    return worker.execute_step(step_id, token)


@shared_task(name="planning.tasks.replan_task", acks_late=True, soft_time_limit=300, time_limit=330)
def replan_task(plan_id: int) -> str:
    return aftermath.replan(plan_id).status


@shared_task(name="planning.tasks.compose_answer_task", acks_late=True, soft_time_limit=120, time_limit=150)
def compose_answer_task(plan_id: int) -> None:
    aftermath.compose_answer(plan_id)


@shared_task(name="planning.tasks.reconcile_task", soft_time_limit=60, time_limit=90)
def reconcile_task() -> dict:
    return reconcile.reconcile()
