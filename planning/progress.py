"""Live progress: after a transition commits, tell the plan's websocket group what changed. Each
subscriber's consumer renders the fragments for its own user (so controls follow their permissions)."""

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

log = logging.getLogger(__name__)


def plan_group(plan_id: int) -> str:
    return f"plan-{plan_id}"


def announce(plan_id: int, *, steps=(), log: str | None = None, all_steps: bool = False) -> None:
    event = {
        "type": "plan.changed",
        "plan_id": plan_id,
        "steps": list(steps),
        "all": all_steps,
        "log": log,
        "at": timezone.now().isoformat(),
    }
    transaction.on_commit(lambda: _send(plan_id, event))


def _send(plan_id: int, event: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            async_to_sync(layer.group_send)(plan_group(plan_id), event)
        else:
            # Called from a thread that runs an event loop: send from a helper thread instead of blocking it.
            with ThreadPoolExecutor(max_workers=1) as pool:
                pool.submit(async_to_sync(layer.group_send), plan_group(plan_id), event).result(timeout=10)
    except Exception:  # noqa: BLE001 (live progress is best effort: the page shows the truth on reload)
        log.warning("Could not broadcast progress for plan %s", plan_id, exc_info=True)
