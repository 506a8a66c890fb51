from django.core.management.base import BaseCommand

from planning.demo import DEMO_USERS, seed_demo


class Command(BaseCommand):
    help = "Create the demo users, data tables and playbooks that are missing (safe to run again)."

    def handle(self, *args, **options):
        created = seed_demo()
        if any(created.values()):
            self.stdout.write(self.style.SUCCESS("Demo data created: " + ", ".join(f"{n} {k}" for k, n in created.items())))
        else:
            self.stdout.write("Demo data already present; nothing changed.")
        if options["verbosity"] > 1:
            for username, role, password in DEMO_USERS:
                self.stdout.write(f"  {username:<6} {role:<9} {password}")
