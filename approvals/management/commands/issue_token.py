from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from approvals.tokens import token_issue
from core.errors import ServiceError


class Command(BaseCommand):
    help = "Issue an API bearer token for a user and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="A label for the token, shown in the user's profile (default: cli)")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help=f"Days until it expires (default: COUNTERSIGN_TOKEN_DAYS, {settings.COUNTERSIGN_TOKEN_DAYS})",
        )

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        try:
            self.stdout.write(token_issue(user=user, name=options["name"], days=options["days"]))
        except ServiceError as error:
            raise CommandError(error.message) from None
