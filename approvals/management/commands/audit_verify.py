from django.core.management.base import BaseCommand, CommandError

from approvals import audit


class Command(BaseCommand):
    help = "Check the audit trail's hash chain; exits 1 and names the first bad event if it is broken."

    def handle(self, *args, **options):
        report = audit.verify()
        if not report["ok"]:
            raise CommandError(f"Audit chain broken at event #{report['first_bad']} ({report['events']} events read).")
        self.stdout.write(self.style.SUCCESS(f"Audit chain intact: {report['events']} events."))
