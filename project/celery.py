"""Celery application: Redis broker, late acks, one task prefetched per worker process."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("countersign")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="countersign.ping")
def ping() -> str:
    """A task that does nothing: the raw Celery round trip that benchmarks measure against."""
    return "pong"
