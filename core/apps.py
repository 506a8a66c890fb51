from django.apps import AppConfig
from django.db.models.signals import post_migrate

from core.roles import sync_role_groups


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self):
        # Permissions only exist after post_migrate, so the role groups are built then (idempotent).
        post_migrate.connect(sync_role_groups, dispatch_uid="countersign-role-groups")
