from django.apps import AppConfig


class PlanningConfig(AppConfig):
    name = "planning"

    def ready(self):
        import importlib

        from django.conf import settings

        # Importing the built-in tools registers them; COUNTERSIGN_TOOL_MODULES adds tools from outside.
        from planning.tools import builtin  # noqa: F401

        for module in settings.COUNTERSIGN_TOOL_MODULES:
            importlib.import_module(module)
