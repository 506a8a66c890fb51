"""API for approval policies (read-only), standing grants and webhook deliveries."""

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from ninja import Router, Schema, Status

from approvals import grants, policies
from approvals.models import StandingGrant, WebhookDelivery
from core.roles import user_can

router = Router()


class Error(Schema):
    detail: Any


class PolicyOut(Schema):
    id: str
    file: str
    line: int
    effect: str
    actions: list[str]
    reason: str
    approvals: int | None
    groups: list[str]
    gate: str
    shadow: bool
    text: str


class GrantIn(Schema):
    tool: str
    predicate: dict[str, dict[str, Any]] = {}
    max_uses: int | None = None
    expires_at: datetime | None = None
    reason: str = ""


class GrantOut(Schema):
    grant_id: int
    tool: str
    predicate: dict[str, Any]
    max_uses: int | None
    uses: int
    uses_left: int | None
    expires_at: str | None
    reason: str
    created_by: str
    state: str


class DeliveryOut(Schema):
    id: int
    endpoint: str
    event: str
    attempts: int
    status_code: int | None
    status_codes: list[int]
    delivered_at: datetime | None
    failed_at: datetime | None
    error: str
    created_at: datetime


def _reviewer(request) -> None:
    if not (user_can(request.user, "approve") or user_can(request.user, "audit")):
        raise PermissionDenied("Only approvers and auditors can read policies, grants and deliveries.")


@router.get("/policies", response={200: list[PolicyOut], 403: Error}, summary="The approval policies in force or in shadow")
def policy_list(request):
    _reviewer(request)
    return policies.policy_summaries()


@router.get("/grants", response={200: list[GrantOut], 403: Error}, summary="Standing grants, newest first")
def grant_list(request):
    _reviewer(request)
    return [grants.grant_summary(grant) for grant in StandingGrant.objects.select_related("created_by")[:500]]


@router.get("/grants/{grant_id}", response={200: GrantOut, 403: Error, 404: Error}, summary="One standing grant")
def grant_detail(request, grant_id: int):
    _reviewer(request)
    grant = StandingGrant.objects.filter(pk=grant_id).select_related("created_by").first()
    if grant is None:
        return Status(404, {"detail": f"No grant #{grant_id}."})
    return grants.grant_summary(grant)


@router.post("/grants", response={201: GrantOut, 403: Error, 422: Error}, summary="Grant: approve matching gates of a tool automatically")
def grant_create(request, payload: GrantIn):
    grant = grants.grant_create(actor=request.user, **payload.dict())
    return Status(201, grants.grant_summary(grant))


@router.delete("/grants/{grant_id}", response={200: GrantOut, 403: Error, 404: Error, 409: Error}, summary="Revoke a standing grant")
def grant_revoke(request, grant_id: int):
    return grants.grant_summary(grants.grant_revoke(grant_id=grant_id, actor=request.user))


@router.get("/webhooks/deliveries", response={200: list[DeliveryOut], 403: Error}, summary="Webhook deliveries with their status codes")
def delivery_list(request):
    _reviewer(request)
    return [
        {**{f: getattr(d, f) for f in DeliveryOut.model_fields if f != "endpoint"}, "endpoint": d.endpoint.name}
        for d in WebhookDelivery.objects.select_related("endpoint")[:500]
    ]
