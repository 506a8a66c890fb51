"""Queue background work by the task's registered name, after the current transaction commits.

Services call `enqueue` instead of importing a tasks module: tasks are entry points (they import
services), so a service that imported them would close an import cycle. A name is also what survives in
a queued message when code moves; every name passed here is checked against Celery's registry by a test.
"""

from celery import current_app
from django.db import transaction


def enqueue(name: str, *args, **options) -> None:
    """Send task `name` with `args` once the surrounding transaction commits (at once outside one).
    `options` are Celery's `apply_async` options (queue, countdown, soft_time_limit, time_limit...);
    without a queue the settings' task routes apply."""
    transaction.on_commit(lambda: current_app.send_task(name, args=args, **options))
