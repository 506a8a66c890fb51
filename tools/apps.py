import importlib

from django.apps import AppConfig
from django.conf import settings


class ToolsConfig(AppConfig):
    name = "tools"

    def ready(self):
        # Importing the built-in tools registers them; COUNTERSIGN_TOOL_MODULES adds tools from outside.
        # Done here, not at import time, because the tools' modules use models (the app registry is ready now).
        importlib.import_module("tools.builtin")
        for module in settings.COUNTERSIGN_TOOL_MODULES:
            importlib.import_module(module)
