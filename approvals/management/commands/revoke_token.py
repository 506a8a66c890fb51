from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from approvals.tokens import token_revoke_raw, tokens_revoke_by_name
from core.errors import ServiceError


class Command(BaseCommand):
    help = "Revoke an API token: give the token itself, or --user USER --name LABEL (every live token with that label)."

    def add_arguments(self, parser):
        parser.add_argument("token", nargs="?", help="The token (cs_…) to revoke")
        parser.add_argument("--user", help="Revoke this user's tokens named --name")
        parser.add_argument("--name", help="The label the tokens were issued with")

    def handle(self, *args, **options):
        if options["token"] and not (options["user"] or options["name"]):
            try:
                token = token_revoke_raw(raw=options["token"])
            except ServiceError as error:
                raise CommandError(error.message) from None
            self.stdout.write(f"Revoked token {token.name!r} of {token.user.get_username()}.")
        elif options["user"] and options["name"] and not options["token"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"No user named {options['user']!r}.")
            count = tokens_revoke_by_name(user=user, name=options["name"])
            if not count:
                raise CommandError(f"{user.get_username()} has no live token named {options['name']!r}.")
            self.stdout.write(f"Revoked {count} token{'s' if count != 1 else ''} named {options['name']!r} of {user.get_username()}.")
        else:
            raise CommandError("Give either the token, or --user USER --name LABEL.")
