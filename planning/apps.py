from django.apps import AppConfig


class PlanningConfig(AppConfig):
    name = "planning"

    def ready(self):
        # Importing the built-in tools registers them.
        from planning.tools import builtin  # noqa: F401
