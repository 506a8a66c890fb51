import json

from django.core.management.base import BaseCommand, CommandError

from planning import planner


class Command(BaseCommand):
    help = "Plan a goal synchronously and print the plan (nothing is stored or run)."

    def add_arguments(self, parser):
        parser.add_argument("goal", help="The goal, in quotes")
        parser.add_argument("--json", action="store_true", help="Print the plan as JSON")
        parser.add_argument("--planner", choices=["llm", "playbook"], help="Default: llm when configured, else playbook")

    def handle(self, *args, **options):
        try:
            draft = planner.draft_plan(options["goal"], planner=options["planner"])
        except planner.PlanningFailed as failure:
            raise CommandError(f"Planning failed: {failure}") from None
        if options["json"]:
            payload = {
                "planner": draft.planner,
                "source": draft.source,
                "model": draft.model,
                "tokens_in": draft.tokens_in,
                "tokens_out": draft.tokens_out,
                "latency_ms": draft.latency_ms,
                "steps": draft.steps,
            }
            self.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"Planner: {draft.planner} ({draft.source})")
        for step in draft.steps:
            self.stdout.write(f"\n[{step['key']}] {step['title']}  risk={step['risk'].upper()}")
            self.stdout.write(f"    tool: {step['tool']}")
            self.stdout.write(f"    args: {json.dumps(step['args'], ensure_ascii=False)}")
            self.stdout.write(f"    depends_on: {', '.join(step['depends_on']) or '-'}")
            if step["condition"]:
                self.stdout.write(f"    condition: {step['condition']}")
