from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from project import health
from sandbox.runner import unavailable_reason  # checked once per process, then cached


@login_not_required
@never_cache
@require_GET
def healthz(request):
    """Liveness for operators and load balancers: a real query, a Redis PING and a Celery worker ping.
    `sandbox` says whether this host's kernel lets code plans run; it is reported, not counted in the
    status: everything else still works without code plans, and a load balancer that took the host out
    for it would stop those too."""
    database, redis_state = health.database(), health.redis_state()
    workers, count = health.workers() if redis_state == "ok" else ("error: redis unavailable", 0)
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


@never_cache
@require_GET
def system_status(request) -> HttpResponse:
    """The banner every page polls: empty when all is well."""
    return render(request, "_system_status.html", {"problem": health.system_problem()})


@login_not_required
@require_GET
def favicon(request) -> HttpResponse:
    return HttpResponse(FAVICON, content_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1d4ed8"/>'
    '<path d="M9 17l5 5 9-12" stroke="#fff" stroke-width="3.5" fill="none" stroke-linecap="round" stroke-linejoin="round"/></svg>'
)
