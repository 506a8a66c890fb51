from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals and audit"

    def ready(self):
        from core.roles import sync_role_groups

        # Permissions only exist after post_migrate, so the role groups are built then (idempotent).
        post_migrate.connect(sync_role_groups, dispatch_uid="countersign-role-groups")
