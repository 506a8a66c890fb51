"""Broadcasting plan changes: after a transition commits, tell the plan's websocket group what changed. Each
subscriber's consumer renders the fragments for its own user (so controls follow their permissions).

Everything announced inside one transaction goes out as one message per plan when it commits (nothing
if it rolls back), so a step's several transitions cost one round trip to Redis."""

import asyncio
import logging
import os
import threading
import uuid

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

log = logging.getLogger(__name__)


INBOX_GROUP = "inbox"


def plan_group(plan_id: int) -> str:
    return f"plan-{plan_id}"


class _Batch:
    """Events of one transaction, flushed by its on_commit hook."""

    def __init__(self):
        self.events: dict[int, dict] = {}

    def add(self, plan_id: int, steps, log_line: str | None, all_steps: bool) -> None:
        event = self.events.setdefault(
            plan_id,
            # The id lets every subscriber with the same controls share one rendering of this event.
            {
                "type": "plan.changed",
                "id": uuid.uuid4().hex,
                "plan_id": plan_id,
                "steps": [],
                "all": False,
                "logs": [],
                "at": timezone.now().isoformat(),
            },
        )
        event["steps"].extend(key for key in steps if key not in event["steps"])
        event["all"] = event["all"] or all_steps
        if log_line:
            event["logs"].append(log_line)

    def flush(self) -> None:
        for plan_id, event in self.events.items():
            _send(plan_group(plan_id), event)
        # Inboxes show statuses, counts and gates of every plan: one nudge per transaction redraws them.
        if self.events:
            _send(INBOX_GROUP, {"type": "inbox.changed", "plans": list(self.events)})


def announce(plan_id: int, *, steps=(), log: str | None = None, all_steps: bool = False) -> None:
    connection = transaction.get_connection()
    batch = getattr(connection, "_countersign_progress", None)
    # A batch is reused only while its hook is still waiting on this transaction (not run, not discarded
    # by a rollback).
    if batch is None or not any(hook == batch.flush for _, hook, _ in connection.run_on_commit):
        batch = _Batch()
        connection._countersign_progress = batch
        if connection.in_atomic_block:
            transaction.on_commit(batch.flush)
    batch.add(plan_id, steps, log, all_steps)
    if not connection.in_atomic_block:
        batch.flush()
        connection._countersign_progress = None


class _Sender:
    """One event loop in a background thread sends every message, so the channel layer's Redis
    connections are reused instead of being opened for each transition."""

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid = os.getpid()
        self.lock = threading.Lock()

    def submit(self, coroutine) -> None:
        with self.lock:
            if self.loop is None or self.loop.is_closed() or self.pid != os.getpid():
                # A forked worker process starts its own loop; the parent's thread did not survive the fork.
                self.loop, self.pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(target=self.loop.run_forever, name="progress-sender", daemon=True).start()
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        future.add_done_callback(_log_failure)


def _log_failure(future) -> None:
    if future.exception() is not None:
        log.warning("Could not broadcast progress: %s", future.exception())


_sender = _Sender()


def _send(group: str, event: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    # Fire and forget, in order: live progress is best effort, and the page shows the truth on reload.
    _sender.submit(layer.group_send(group, event))
