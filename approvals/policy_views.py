"""The Policies page: the policy files in force (and in shadow), standing grants, webhook deliveries."""

import json
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.utils.dateparse import parse_datetime
from django.utils.timezone import make_aware
from django.views.decorators.http import require_GET, require_POST

from approvals import grants, policies
from approvals.models import StandingGrant, WebhookDelivery
from core.errors import ServiceError
from core.roles import user_can


def _require_reviewer(user) -> None:
    if not (user_can(user, "approve") or user_can(user, "audit")):
        raise PermissionDenied("Only approvers and auditors can see policies and grants.")


@login_required
@require_GET
def policy_page(request):
    _require_reviewer(request.user)
    context = {
        "policies": policies.policy_summaries(),
        "grants": StandingGrant.objects.select_related("created_by")[:200],
        "deliveries": WebhookDelivery.objects.select_related("endpoint")[:50],
        "can_grant": user_can(request.user, "approve"),
        "initial": {"tool": request.GET.get("tool", ""), "predicate": request.GET.get("predicate", "{}")},
    }
    return render(request, "approvals/policies.html", context)


def _expiry(text: str) -> datetime | None:
    if not text.strip():
        return None
    moment = parse_datetime(text.strip())
    if moment is None:
        raise ServiceError("The expiry must be a date and time, like 2026-12-31T17:00.", status=422)
    return make_aware(moment) if moment.tzinfo is None else moment


@login_required
@require_POST
def grant_create(request):
    try:
        predicate = json.loads(request.POST.get("predicate") or "{}")
    except ValueError:
        predicate = None
    try:
        uses = request.POST.get("max_uses", "").strip()
        grant = grants.grant_create(
            actor=request.user,
            tool=request.POST.get("tool", "").strip(),
            predicate=predicate,
            max_uses=int(uses) if uses.isdigit() else None,
            expires_at=_expiry(request.POST.get("expires_at", "")),
            reason=request.POST.get("reason", "").strip(),
        )
        messages.success(request, f"Grant #{grant.pk} for {grant.tool} is live.")
    except ServiceError as error:
        messages.error(request, error.message)
    return redirect("policies")


@login_required
@require_POST
def grant_revoke(request, grant_id: int):
    try:
        grants.grant_revoke(grant_id=grant_id, actor=request.user)
        messages.success(request, f"Grant #{grant_id} revoked.")
    except ServiceError as error:
        messages.error(request, error.message)
    return redirect("policies")
