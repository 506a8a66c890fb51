from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from approvals.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API bearer token for a user and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="A label for the token")

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user named {options['username']!r}.")
        self.stdout.write(ApiToken.issue(user=user, name=options["name"]))
