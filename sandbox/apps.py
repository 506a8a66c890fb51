from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "sandbox"
    verbose_name = "Data tables and code sandbox"
