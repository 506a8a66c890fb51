from celery import shared_task

from planning import services


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330)
def plan_generate_task(plan_id: int) -> str:
    return services.plan_generate(plan_id=plan_id).status
