from datetime import datetime, time, timedelta

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET

from approvals import audit, metrics, selectors

FILTERS = ("plan", "actor", "action", "risk", "since", "until", "q")


def _require_auditor(user) -> None:
    if not user.has_perm("approvals.view_auditevent"):
        raise PermissionDenied("Only auditors and administrators can read the audit trail.")


def _filters(request) -> dict:
    return {name: request.GET.get(name, "").strip() or None for name in FILTERS}


@require_GET
def history(request):
    _require_auditor(request.user)
    filters = _filters(request)
    error = None
    try:
        if filters["plan"] and not filters["plan"].isdigit():
            raise ValueError("Plan must be a number.")
        events = selectors.audit_events(**filters).order_by("-seq")
    except ValueError as problem:
        error, events = str(problem), selectors.audit_events().none()
    page = Paginator(events, 50).get_page(request.GET.get("page", 1))
    query = "&".join(f"{k}={v}" for k, v in filters.items() if v)
    context = {"page": page, "filters": filters, "facets": selectors.facets(), "error": error, "query": query, "verify": None}
    if request.GET.get("verify"):
        context["verify"] = audit.verify()
    return render(request, "approvals/history.html", context, status=422 if error else 200)


@require_GET
def export(request, file_format: str):
    _require_auditor(request.user)
    try:
        events = selectors.audit_events(**_filters(request))
    except ValueError as problem:
        return HttpResponse(str(problem), status=422, content_type="text/plain")
    if file_format == "json":
        response = StreamingHttpResponse(selectors.stream_json(events), content_type="application/json")
    else:
        response = StreamingHttpResponse(selectors.stream_csv(events), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="countersign-audit.{file_format}"'
    return response


def _date(value: str | None):
    try:
        return parse_date(value or "")
    except ValueError:  # well formed but impossible, like 2026-13-01
        return None


def _period(request) -> tuple[datetime, datetime, str | None]:
    today = timezone.localdate()
    error = None
    since, until = _date(request.GET.get("since")), _date(request.GET.get("until"))
    if request.GET.get("since") and since is None or request.GET.get("until") and until is None:
        error = "Dates are YYYY-MM-DD, and must exist."
    since = since or today - timedelta(days=30)
    until = until or today
    if since > until:
        error, since = "The start of the period is after its end.", until
    start = timezone.make_aware(datetime.combine(since, time.min))
    end = timezone.make_aware(datetime.combine(until, time.max))
    return start, end, error


@require_GET
def metrics_page(request):
    _require_auditor(request.user)
    start, end, error = _period(request)
    summary = metrics.summary(since=start, until=end)
    largest = max(summary.by_status.values(), default=0)
    bars = [
        {"label": label, "count": count, "width": int(300 * count / largest) if largest else 0, "y": 8 + i * 26}
        for i, (label, count) in enumerate(summary.by_status.items())
    ]
    context = {
        "summary": summary,
        "since": start.date(),
        "until": end.date(),
        "error": error,
        "bars": bars,
        "chart_height": 16 + 26 * len(bars),
    }
    return render(request, "approvals/metrics.html", context, status=422 if error else 200)
