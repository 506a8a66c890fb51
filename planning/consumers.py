from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user
from django.core.exceptions import PermissionDenied
from django.http import Http404

from core.roles import user_can
from planning.broadcast import INBOX_GROUP, plan_group
from planning.fragments import render_gates_badge, render_inbox_fragments, render_plan_fragments
from planning.permissions import get_plan_for_user

# Close codes the htmx ws extension does not reconnect on (it retries only 1006, 1011, 1012, 1013).
SESSION_GONE = 4401
NOT_ALLOWED = 4403


class PlanConsumer(AsyncWebsocketConsumer):
    """Live progress for one plan. Only users who may view the plan join its group; everyone else is
    refused before the handshake completes. The session and the permission are checked again on every
    event, so a socket stops streaming once its user logs out or loses the role."""

    async def connect(self):
        self.plan_id = self.scope["url_route"]["kwargs"]["plan_id"]
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None else None
        refusal, fragment = await self._render(everything=True)
        if refusal:
            await self.close(code=refusal)
            return
        await self.channel_layer.group_add(plan_group(self.plan_id), self.channel_name)
        await self.accept()
        # On (re)connect the page gets the whole current state, so nothing missed while offline stays stale.
        await self.send(text_data=fragment)

    async def disconnect(self, code):
        await self.channel_layer.group_discard(plan_group(self.plan_id), self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        # The socket is one-way: decisions go through the HTTP views, which check CSRF and permissions.
        return

    async def plan_changed(self, event):
        refusal, fragment = await self._render(
            steps=event.get("steps", []),
            everything=event.get("all", False),
            logs=event.get("logs", []),
            at=event.get("at"),
            event_id=event.get("id"),
        )
        if refusal:
            await self.channel_layer.group_discard(plan_group(self.plan_id), self.channel_name)
            await self.close(code=refusal)
        elif fragment:
            await self.send(text_data=fragment)

    def _current_user(self):
        """The user the session belongs to now, read afresh: logging out deletes the session, and a changed
        password invalidates it (get_user checks the session's auth hash), both making this anonymous."""
        if self.session_key is None:
            return None
        store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=self.session_key)
        user = get_user(SimpleNamespace(session=store))
        return user if user.is_authenticated else None

    @database_sync_to_async
    def _render(self, *, steps=(), everything=False, logs=(), at=None, event_id=None) -> tuple[int | None, str]:
        user = self._current_user()
        if user is None:
            return SESSION_GONE, ""
        try:
            plan = get_plan_for_user(user, self.plan_id)
        except (PermissionDenied, Http404):
            return NOT_ALLOWED, ""
        return None, render_plan_fragments(plan, user, step_keys=None if everything else steps, logs=logs, at=at, event_id=event_id)


class InboxConsumer(PlanConsumer):
    """The inbox, live: every committed plan change nudges it to redraw its gates, tabs and list. Only
    users who may view plans join; the session and permission are checked again on every event."""

    async def connect(self):
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None else None
        refusal, fragment = await self._render_inbox()
        if refusal:
            await self.close(code=refusal)
            return
        await self.channel_layer.group_add(INBOX_GROUP, self.channel_name)
        await self.accept()
        # On (re)connect the inbox redraws from the current state, so nothing missed offline stays stale.
        await self.send(text_data=fragment)

    async def disconnect(self, code):
        await self.channel_layer.group_discard(INBOX_GROUP, self.channel_name)

    async def inbox_changed(self, event):
        refusal, fragment = await self._render_inbox()
        if refusal:
            await self.channel_layer.group_discard(INBOX_GROUP, self.channel_name)
            await self.close(code=refusal)
        else:
            await self.send(text_data=fragment)

    @database_sync_to_async
    def _render_inbox(self) -> tuple[int | None, str]:
        user = self._current_user()
        if user is None:
            return SESSION_GONE, ""
        if not user_can(user, "view"):
            return NOT_ALLOWED, ""
        return None, render_inbox_fragments(user)


class BadgeConsumer(InboxConsumer):
    """The nav badge on every page but the inbox: the number of gates waiting, redrawn with each plan
    change. Only approvers join (nobody else sees gates); re-checked on every event like the inbox."""

    @database_sync_to_async
    def _render_inbox(self) -> tuple[int | None, str]:
        user = self._current_user()
        if user is None:
            return SESSION_GONE, ""
        if not user_can(user, "approve"):
            return NOT_ALLOWED, ""
        return None, render_gates_badge(user)
