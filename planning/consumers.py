from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import PermissionDenied
from django.http import Http404

from planning.broadcast import plan_group
from planning.fragments import render_plan_fragments
from planning.permissions import get_plan_for_user


class PlanConsumer(AsyncWebsocketConsumer):
    """Live progress for one plan. Only users who may view the plan join its group; everyone else is
    refused before the handshake completes."""

    async def connect(self):
        self.plan_id = self.scope["url_route"]["kwargs"]["plan_id"]
        self.user = self.scope.get("user")
        fragment = await self._render(everything=True)
        if fragment is None:
            await self.close(code=4403)
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
        fragment = await self._render(
            steps=event.get("steps", []), everything=event.get("all", False), logs=event.get("logs", []), at=event.get("at")
        )
        if fragment:
            await self.send(text_data=fragment)

    @database_sync_to_async
    def _render(self, *, steps=(), everything=False, logs=(), at=None) -> str | None:
        try:
            plan = get_plan_for_user(self.user, self.plan_id)
        except (PermissionDenied, Http404):
            return None
        return render_plan_fragments(plan, self.user, step_keys=None if everything else steps, logs=logs, at=at)
