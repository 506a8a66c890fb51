import json

from django.core.management.base import BaseCommand, CommandError

from approvals import audit


class Command(BaseCommand):
    help = "Check the audit trail's hash chain; exits 1 and names the first bad event if it is broken."

    def add_arguments(self, parser):
        parser.add_argument("--head", help="A head saved earlier with `audit_head`: also detects a truncated tail")

    def handle(self, *args, **options):
        head = None
        if options["head"]:
            try:
                with open(options["head"]) as saved:
                    head = json.load(saved)
            except (OSError, json.JSONDecodeError) as error:
                raise CommandError(f"Cannot read the saved head: {error}") from None
        report = audit.verify(head=head)
        if not report["ok"]:
            raise CommandError(f"Audit chain broken at event #{report['first_bad']}: {report['reason']} ({report['events']} events read).")
        self.stdout.write(self.style.SUCCESS(f"Audit chain intact: {report['events']} events."))
