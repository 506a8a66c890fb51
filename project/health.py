"""The checks behind /healthz and the system banner: a real query, a Redis PING, a Celery worker ping."""

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from project.celery import app as celery_app

BANNER_CACHE_KEY = "countersign:system-problem"
BANNER_CACHE_S = 5


def database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as error:  # noqa: BLE001 (any failure means "not ok", and its text is the diagnosis)
        return f"error: {type(error).__name__}"


def redis_state() -> str:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1).ping()
        return "ok"
    except redis.RedisError as error:
        return f"error: {type(error).__name__}"


def workers() -> tuple[str, int]:
    try:
        replies = celery_app.control.ping(timeout=0.5)
    except Exception as error:  # noqa: BLE001 (broker down surfaces as many exception types)
        return f"error: {type(error).__name__}", 0
    return ("ok" if replies else "error: no worker answered"), len(replies or [])


def system_problem() -> str:
    """What an operator should know is broken, in a sentence, or "" when all is well. Cached for a few
    seconds, so pages that ask often cost one ping per process per few seconds."""
    found = cache.get(BANNER_CACHE_KEY)
    if found is None:
        found = _problem_now()
        cache.set(BANNER_CACHE_KEY, found, BANNER_CACHE_S)
    return found


def _problem_now() -> str:
    if redis_state() != "ok":
        return "Redis is unreachable: plans cannot be drafted or run, and pages are not live. Tell whoever runs this server."
    if workers()[0] != "ok":
        return "No worker is answering: new goals wait for a planner and runs do not move until one is back."
    return ""
