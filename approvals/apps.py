from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured

from approvals.policies import check_policies


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals and audit"

    def ready(self):
        # A policy that does not parse or fit the schema would silently change who must approve what:
        # refuse to start instead, naming the file and line.
        errors = check_policies()
        if errors:
            raise ImproperlyConfigured("Bad approval policy: " + "; ".join(str(error) for error in errors))
