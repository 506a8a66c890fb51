import importlib

from celery.signals import task_prerun
from django.apps import AppConfig
from django.conf import settings
from django.core.signals import request_started

from tools.registry import registry


class ToolsConfig(AppConfig):
    name = "tools"

    def ready(self):
        # Importing the built-in tools registers them; COUNTERSIGN_TOOL_MODULES adds tools from outside.
        # Done here, not at import time, because the tools' modules use models (the app registry is ready now).
        importlib.import_module("tools.builtin")
        for module in settings.COUNTERSIGN_TOOL_MODULES:
            importlib.import_module(module)
        # MCP tools live in the database, which ready() must not query: the registry loads them on first
        # use, and each request and task starts by checking they have not changed (see tools.catalogue).
        registry.attach(importlib.import_module("tools.catalogue").DatabaseTools())
        request_started.connect(_refresh_tools, dispatch_uid="countersign-tools-refresh-request")
        task_prerun.connect(_refresh_tools, dispatch_uid="countersign-tools-refresh-task", weak=False)


def _refresh_tools(**kwargs):
    registry.refresh()
