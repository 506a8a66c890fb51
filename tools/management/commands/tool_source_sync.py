from django.core.management.base import BaseCommand, CommandError

from core.errors import ServiceError
from tools import services
from tools.models import ToolDefinition, ToolSource


def print_report(out, report: services.SyncReport) -> None:
    risks = dict(ToolDefinition.objects.filter(source__name=report.source).values_list("full_name", "risk"))
    for label, names in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
        shown = ", ".join(f"{name} ({risks.get(name, 'high').upper()})" if label != "removed" else name for name in names)
        out.write(f"{label}: {shown or '-'}")
    if report.skipped:
        out.write(f"skipped (name longer than {services.MAX_FULL_NAME} characters or repeated): {', '.join(report.skipped)}")


class Command(BaseCommand):
    help = "Sync a tool source: print the tools added, changed and removed since the last sync."

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, **options):
        source = ToolSource.objects.filter(name=options["name"]).first()
        if source is None:
            raise CommandError(f"No tool source named {options['name']!r}.")
        try:
            report = services.tool_source_sync(source=source, actor=None)
        except ServiceError as error:
            raise CommandError(error.message) from None
        print_report(self.stdout, report)
