import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from project.celery import app as celery_app
from sandbox.runner import unavailable_reason  # checked once per process, then cached


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as error:  # noqa: BLE001 (any failure means "not ok", and its text is the diagnosis)
        return f"error: {type(error).__name__}"


def _redis() -> str:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1).ping()
        return "ok"
    except redis.RedisError as error:
        return f"error: {type(error).__name__}"


def _workers() -> tuple[str, int]:
    try:
        replies = celery_app.control.ping(timeout=0.5)
    except Exception as error:  # noqa: BLE001 (broker down surfaces as many exception types)
        return f"error: {type(error).__name__}", 0
    return ("ok" if replies else "error: no worker answered"), len(replies or [])


@login_not_required
@never_cache
@require_GET
def healthz(request):
    """Liveness for operators and load balancers: a real query, a Redis PING and a Celery worker ping.
    `sandbox` says whether this host's kernel lets code plans run; it is reported, not counted in the
    status: everything else still works without code plans, and a load balancer that took the host out
    for it would stop those too."""
    database, redis_state = _database(), _redis()
    workers, count = _workers() if redis_state == "ok" else ("error: redis unavailable", 0)
    ok = database == redis_state == workers == "ok"
    reason = unavailable_reason()
    body = {
        "status": "ok" if ok else "degraded",
        "database": database,
        "redis": redis_state,
        "workers": workers,
        "worker_count": count,
        "sandbox": "ok" if reason is None else f"code plans unavailable: {reason}",
    }
    return JsonResponse(body, status=200 if ok else 503)
