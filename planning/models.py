from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Count, Sum

from core.canonical import canonical_json, sha256_of
from core.risk import Risk

# The step fields that make up a plan's content: the hash and every diff are computed over exactly these.
STEP_CONTENT_FIELDS = ("key", "title", "description", "tool", "args", "depends_on", "condition", "success_criteria", "risk", "tool_hash")
# Steps stored before tool definitions were pinned have no tool_hash; leaving the empty field out of their
# content keeps their hashes (and the approvals bound to them) as they were.
OPTIONAL_CONTENT_FIELDS = {"tool_hash"}


class Goal(models.Model):
    class Mode(models.TextChoices):
        STEPS = "steps", "Steps (tool calls)"
        CODE = "code", "Code (sandboxed Python)"

    text = models.TextField()
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.STEPS)
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="goals")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.text[:80]


class Plan(models.Model):
    class Status(models.TextChoices):
        PLANNING = "planning", "Planning"
        PLANNING_FAILED = "planning_failed", "Planning failed"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        CHANGES_REQUESTED = "changes_requested", "Changes requested"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        PARTIALLY_COMPLETED = "partially_completed", "Partially completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        SUPERSEDED = "superseded", "Superseded"
        # Nobody decided before the final approval deadline (issue 16): never recorded as a rejection.
        EXPIRED = "expired", "Expired"
        # One of several drafts for a goal, waiting for an operator to choose it: never approvable or
        # runnable until chosen (planning/alternatives.py).
        ALTERNATIVE = "alternative", "Alternative (not chosen)"

    class Planner(models.TextChoices):
        LLM = "llm", "LLM"
        PLAYBOOK = "playbook", "Playbook"
        HUMAN = "human", "Human"
        REPLAN = "replan", "Replan"
        DECOMPOSE = "decompose", "Decomposition"

    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="plans")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PLANNING, db_index=True)
    revision = models.PositiveIntegerField(default=0)
    # Preflight findings of the current revision (planning/preflight.py), computed when it was written.
    preflight = models.JSONField(default=list, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    planner = models.CharField(max_length=10, choices=Planner.choices, default=Planner.PLAYBOOK)
    requested_planner = models.CharField(max_length=10, blank=True, help_text="llm, playbook, or blank for automatic")
    planner_source = models.CharField(max_length=200, blank=True, help_text="Playbook name or model that drafted it")
    model = models.CharField(max_length=100, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    output_mode = models.CharField(
        max_length=20, blank=True, help_text="How the LLM's plan came back: json_schema_strict, json_object or text"
    )
    budget_usd = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, help_text="LLM spend allowed; empty: COUNTERSIGN_PLAN_BUDGET_USD"
    )
    budget_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="LLM tokens allowed; empty: COUNTERSIGN_PLAN_BUDGET_TOKENS"
    )
    failure_reason = models.TextField(blank=True)
    answer_text = models.TextField(blank=True)
    replan_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replans")
    replan_count = models.PositiveIntegerField(default=0)
    # Alternatives (issue 20): how many drafts the goal asked for, and this draft's score and why.
    alternatives_requested = models.PositiveSmallIntegerField(default=1)
    alternative_score = models.FloatField(null=True, blank=True)
    alternative_reason = models.CharField(max_length=300, blank=True)
    chosen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="Who chose this alternative"
    )
    executing_hash = models.CharField(max_length=64, blank=True, help_text="The approved content hash the current run executes")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        permissions = [
            ("approve_plan", "Can countersign plans and runtime gates"),
            ("run_plan", "Can run and cancel approved plans"),
        ]

    def __str__(self):
        return f"Plan {self.pk} ({self.status})"

    @property
    def short_hash(self) -> str:
        return self.content_hash[:12]

    def author_ids(self) -> set[int]:
        """Who shaped the content under review (four-eyes keeps them from countersigning it): the authors
        of its revisions and whoever chose it among alternatives."""
        authors = set(self.revisions.filter(author__isnull=False).values_list("author_id", flat=True))
        return authors | {self.chosen_by_id} if self.chosen_by_id else authors

    @property
    def is_editable(self) -> bool:
        return self.status in EDITABLE_STATUSES

    def llm_usage(self) -> dict:
        """Every LLM call made for this plan, summed: planning, repairs, replans, steps and answers."""
        totals = self.llm_calls.aggregate(calls=Count("id"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost_usd"))
        return {
            "calls": totals["calls"],
            "tokens_in": totals["tokens_in"] or 0,
            "tokens_out": totals["tokens_out"] or 0,
            "cost_usd": float(totals["cost"] or Decimal(0)),
        }


# A run ended and its answer follows: every step that was meant to run ran, some did not, or one failed.
FINISHED_STATUSES = {Plan.Status.SUCCEEDED, Plan.Status.PARTIALLY_COMPLETED, Plan.Status.FAILED}
EDITABLE_STATUSES = {Plan.Status.AWAITING_APPROVAL, Plan.Status.CHANGES_REQUESTED, Plan.Status.APPROVED, Plan.Status.REJECTED}


class Step(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        WAITING_APPROVAL = "waiting_approval", "Waiting for approval"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped"
        CANCELLED = "cancelled", "Cancelled"
        INTERRUPTED = "interrupted", "Interrupted"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="steps")
    key = models.CharField(max_length=32)
    position = models.PositiveIntegerField(default=0)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tool = models.CharField(max_length=100)
    args = models.JSONField(default=dict)
    depends_on = models.JSONField(default=list)
    condition = models.CharField(max_length=500, blank=True)
    success_criteria = models.TextField(blank=True)
    risk = models.CharField(max_length=8, choices=Risk.choices, default=Risk.HIGH)
    tool_hash = models.CharField(
        max_length=64, blank=True, help_text="Definition hash of the tool when the step was written (from the registry)"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    note = models.CharField(max_length=300, blank=True, help_text="Why a step was skipped, cancelled or interrupted")
    resolved_args = models.JSONField(null=True, blank=True, help_text="Arguments after templates were filled in")
    provenance = models.JSONField(
        null=True, blank=True, help_text="Per argument, the step outputs its value came from, with trust labels (at resolution)"
    )
    gate_hash = models.CharField(max_length=64, blank=True, help_text="Hash of (step, tool, resolved args) a gate approval binds to")
    # Not content: which literals a replan wrote while untrusted facts were in its prompt (planning/provenance.py).
    replan_sources = models.JSONField(
        default=dict, blank=True, help_text="Per argument (or condition): the replan that wrote its value and the untrusted facts it read"
    )
    approved_hash = models.CharField(max_length=64, blank=True, help_text="Hash of this step's content when its run started")
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["plan", "key"], name="unique_step_key_per_plan")]

    def __str__(self):
        return f"{self.key}: {self.title}"

    def content(self) -> dict:
        return _content_of({field: getattr(self, field) for field in STEP_CONTENT_FIELDS})


class PlanRevision(models.Model):
    """Immutable snapshot of a plan's steps at one revision, for history, diffs and approval binding."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    content = models.JSONField()
    content_hash = models.CharField(max_length=64)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    planner = models.CharField(max_length=10, choices=Plan.Planner.choices)
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["plan", "number"]
        constraints = [models.UniqueConstraint(fields=["plan", "number"], name="unique_revision_number")]

    def __str__(self):
        return f"Plan {self.plan_id} r{self.number}"


class StepAttempt(models.Model):
    """One execution attempt. The idempotency key makes a non-idempotent tool run at most once per key."""

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    idempotency_key = models.CharField(max_length=120, unique=True)
    status = models.CharField(max_length=20, default="running")
    worker = models.CharField(max_length=200, blank=True, help_text="hostname:pid of the process that ran it")
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["step", "number"]

    def __str__(self):
        return self.idempotency_key


class LlmCall(models.Model):
    """One answered LLM call made for a plan, with what it cost. Written as the call returns, so the
    plan's budget sees it before the next call."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="llm_calls")
    step_key = models.CharField(max_length=32, blank=True, help_text="The step whose tool made the call, if any")
    purpose = models.CharField(max_length=20, help_text="planning, repair, replan, code, answer, llm_generate")
    model = models.CharField(max_length=100)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    output_mode = models.CharField(max_length=20, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["plan", "id"]

    def __str__(self):
        return f"{self.purpose} for plan {self.plan_id}: {self.tokens_in}+{self.tokens_out} tokens"


class Fact(models.Model):
    """One entry of a run's facts ledger: a short summary of what a finished step found, with the step
    it came from. Answers and replans are written from these, not from raw outputs (planning/ledger.py)."""

    class Method(models.TextChoices):
        TOOL = "tool", "Summary declared by the tool"
        VERBATIM = "verbatim", "Short output, kept whole"
        LLM = "llm", "Summarised by the LLM"
        TRUNCATED = "truncated", "Long output, cut short"
        STATUS = "status", "Did not succeed"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="facts")
    step_key = models.CharField(max_length=32)
    step_title = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=100, blank=True)
    step_status = models.CharField(max_length=20)
    summary = models.TextField()
    method = models.CharField(max_length=10, choices=Method.choices)
    # The output (or error) it summarises, by hash: a step re-run after a replan gets a fresh fact.
    source_hash = models.CharField(max_length=64)
    # Whether the text it summarises came from trusted data (its step's tool and inputs): an untrusted fact
    # may carry a web page's or a model's instructions into an answer or a replan.
    trusted = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["plan", "id"]
        constraints = [models.UniqueConstraint(fields=["plan", "step_key"], name="unique_fact_per_step")]

    def __str__(self):
        return f"[{self.step_key}] {self.summary[:60]}"


class Playbook(models.Model):
    """A reusable plan: seeded for the demo goals, or saved by an approver from an approved plan."""

    class Source(models.TextChoices):
        SEEDED = "seeded", "Seeded"
        SAVED = "saved", "Saved from a plan"

    name = models.CharField(max_length=200, unique=True)
    goal_text = models.TextField(help_text="The goal this playbook answers; drafts are matched against it")
    steps = models.JSONField(help_text="Step list; args may use {{ goal.NAME }} placeholders")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.SEEDED)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    from_plan = models.ForeignKey(Plan, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


def _content_of(step: dict) -> dict:
    return {f: step[f] for f in STEP_CONTENT_FIELDS if f not in OPTIONAL_CONTENT_FIELDS or step.get(f)}


def plan_content(steps) -> list[dict]:
    """The canonical content of a plan: its steps' content fields, in order."""
    return [step.content() if isinstance(step, Step) else _content_of(step) for step in steps]


def content_hash_of(steps) -> str:
    return sha256_of(plan_content(steps))


def content_json_of(steps) -> str:
    return canonical_json(plan_content(steps))
