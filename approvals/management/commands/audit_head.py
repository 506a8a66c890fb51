import json

from django.core.management.base import BaseCommand

from approvals import audit


class Command(BaseCommand):
    help = "Print the audit chain's head, signed with HMAC (save it elsewhere; `audit_verify --head FILE` checks against it)."

    def handle(self, *args, **options):
        self.stdout.write(json.dumps(audit.export_head(), indent=2))
