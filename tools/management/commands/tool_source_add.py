from django.core.management.base import BaseCommand, CommandError

from core.errors import ServiceError
from tools import services
from tools.management.commands.tool_source_sync import print_report


class Command(BaseCommand):
    help = "Add an MCP server as a tool source and sync its tools at once."

    def add_arguments(self, parser):
        parser.add_argument("name", help="A slug; its tools are named NAME.TOOL")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--stdio", metavar='"CMD ARGS..."', help="Start the server with this command line")
        where.add_argument("--url", help="The server's Streamable HTTP endpoint")
        parser.add_argument("--trusted", action="store_true", help="Let the server's annotations set risk tiers")
        parser.add_argument("--header", action="append", default=[], metavar="K=V", help="HTTP header (stored as a secret)")
        parser.add_argument("--env", action="append", default=[], metavar="K=V", help="Environment variable for a stdio server")
        parser.add_argument("--cwd", default="", help="Working directory for a stdio server")
        parser.add_argument("--timeout", type=float, default=30.0, help="Per-call timeout in seconds (default 30)")

    def handle(self, *args, **options):
        try:
            source, report = services.tool_source_create(
                actor=None,
                name=options["name"],
                stdio=options["stdio"] or "",
                url=options["url"] or "",
                cwd=options["cwd"],
                env=services.parse_pairs(options["env"], what="environment variable", pattern=services.ENV_NAME),
                headers=services.parse_pairs(options["header"], what="header", pattern=services.HEADER_NAME),
                trusted=options["trusted"],
                timeout_s=options["timeout"],
            )
        except ServiceError as error:
            raise CommandError(error.message) from None
        trust = "trusted" if source.trusted else "untrusted"
        self.stdout.write(f"Added {source.transport} source {source.name} ({trust}).")
        if report is None:
            raise CommandError(f"The first sync failed: {source.last_sync_error}\nFix the server and run tool_source_sync {source.name}.")
        print_report(self.stdout, report)
