"""Thin Celery tasks: load by id, call a service. Services queue them by name (core.jobs.enqueue)."""

from celery import shared_task

from planning import critic, dry_runs, services


@shared_task(name="planning.tasks.plan_generate_task", acks_late=True, soft_time_limit=300, time_limit=330)
def plan_generate_task(plan_id: int) -> str:
    return services.plan_generate(plan_id=plan_id).status


@shared_task(name="planning.tasks.code_dry_run_task", acks_late=True, soft_time_limit=120, time_limit=150)
def code_dry_run_task(plan_id: int) -> str | None:
    result = dry_runs.dry_run_perform(plan_id)
    return result.result.get("status") if result else None


@shared_task(name="planning.tasks.preflight_critic_task", acks_late=True, soft_time_limit=120, time_limit=150)
def preflight_critic_task(plan_id: int, revision: int) -> int:
    return critic.critique(plan_id, revision)


@shared_task(name="planning.tasks.step_decompose_task", acks_late=True, soft_time_limit=300, time_limit=330)
def step_decompose_task(plan_id: int, key: str, revision: int, actor_id: int) -> int:
    return services.step_decompose_perform(plan_id=plan_id, key=key, revision=revision, actor_id=actor_id).revision
