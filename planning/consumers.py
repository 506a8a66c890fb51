from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.loader import render_to_string

from planning.permissions import get_plan_for_user


def plan_group(plan_id: int) -> str:
    return f"plan-{plan_id}"


class PlanConsumer(AsyncWebsocketConsumer):
    """Live progress for one plan. Only users who may view the plan join its group; everyone else is
    refused before the handshake completes."""

    async def connect(self):
        self.plan_id = self.scope["url_route"]["kwargs"]["plan_id"]
        fragment = await self._current_state(self.scope.get("user"))
        if fragment is None:
            await self.close(code=4403)
            return
        await self.channel_layer.group_add(plan_group(self.plan_id), self.channel_name)
        await self.accept()
        # On (re)connect the page gets the current state, so nothing missed while offline stays stale.
        await self.send(text_data=fragment)

    async def disconnect(self, code):
        await self.channel_layer.group_discard(plan_group(self.plan_id), self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        # The socket is one-way: decisions go through the HTTP views, which check CSRF and permissions.
        return

    async def plan_changed(self, event):
        await self.send(text_data=event["html"])

    @database_sync_to_async
    def _current_state(self, user) -> str | None:
        try:
            plan = get_plan_for_user(user, self.plan_id)
        except (PermissionDenied, Http404):
            return None
        return render_to_string("planning/_plan_live.html", {"plan": plan, "oob": True})
