from django.core.management.base import BaseCommand

from tools.models import ToolSource


class Command(BaseCommand):
    help = "List the tool sources with their tools and risk tiers (header values are never printed)."

    def handle(self, *args, **options):
        sources = ToolSource.objects.prefetch_related("tools")
        if not sources:
            self.stdout.write("No tool sources. Add one with tool_source_add.")
        for source in sources:
            flags = ", ".join([source.transport, "trusted" if source.trusted else "untrusted", "enabled" if source.enabled else "disabled"])
            synced = source.last_synced_at.isoformat(timespec="seconds") if source.last_synced_at else "never"
            self.stdout.write(f"{source.name}  [{flags}]  {source.target}")
            self.stdout.write(f"    last sync: {synced} ({source.last_sync_status}) {source.last_sync_error}".rstrip())
            for tool in source.tools.all():
                self.stdout.write(f"    {tool.full_name}  {tool.risk.upper()}  {tool.status}  ({tool.risk_reason})")
