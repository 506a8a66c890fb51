from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals import audit, selectors, tokens
from approvals.models import ApiToken

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


@require_GET
def profile(request):
    return render(request, "approvals/profile.html", {"tokens": tokens.tokens_of(request.user)})


@require_POST
def token_revoke(request, token_id: int):
    # Only the owner's own tokens are found: anyone else's id is a 404, not a 403 that confirms it exists.
    token = tokens.token_revoke(token=get_object_or_404(ApiToken, pk=token_id, user=request.user), actor=request.user)
    if request.htmx:
        return render(request, "approvals/profile.html#token-row", {"token": token})
    messages.success(request, f"Revoked the token {token.name!r}.")
    return redirect("profile")
