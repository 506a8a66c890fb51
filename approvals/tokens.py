"""API bearer tokens: issued for a lifetime, revocable, recorded in the audit trail. The API
authenticates through `token_authenticate`, so an expired or revoked token is refused in one place."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals import audit
from approvals.models import ApiToken
from core.errors import ServiceError
from core.text import refuse_control_characters

# last_used_at is written at most this often per token, so a busy script does not write on every call.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def tokens_of(user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def token_issue(*, user, name: str = "cli", days: int | None = None, actor=None) -> str:
    """A new token for `user`, returned once (only its digest is stored)."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ServiceError("Give the token a name of at most 100 characters.", status=422)
    refuse_control_characters(name, field="token name")
    days = settings.COUNTERSIGN_TOKEN_DAYS if days is None else days
    if days < 1:
        raise ServiceError("A token must live at least one day.", status=422)
    with transaction.atomic():
        raw = ApiToken.issue(user=user, name=name, days=days)
        token = ApiToken.objects.get(digest=ApiToken.digest_of(raw))
        audit.record(
            action="token.issued", actor=actor, data={"user": user.get_username(), "name": name, "expires_at": token.expires_at.isoformat()}
        )
    return raw


def token_revoke(*, token: ApiToken, actor=None) -> ApiToken:
    """Revoke one token; revoking a revoked token changes nothing."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit.record(action="token.revoked", actor=actor, data={"user": token.user.get_username(), "name": token.name})
    return token


def token_revoke_raw(*, raw: str, actor=None) -> ApiToken:
    token = ApiToken.objects.filter(digest=ApiToken.digest_of(raw.strip())).first()
    if token is None:
        raise ServiceError("No such token.", status=404)
    return token_revoke(token=token, actor=actor)


def tokens_revoke_by_name(*, user, name: str, actor=None) -> int:
    """Revoke every live token of `user` with this name; how many were revoked."""
    live = list(ApiToken.objects.filter(user=user, name=name, revoked_at__isnull=True))
    for token in live:
        token_revoke(token=token, actor=actor)
    return len(live)


def token_authenticate(raw: str):
    """The active user a live token belongs to, or None (unknown, expired, revoked, or user inactive)."""
    now = timezone.now()
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=ApiToken.digest_of(raw), revoked_at__isnull=True, expires_at__gt=now, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)
    return token.user
