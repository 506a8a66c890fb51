from django.db import models


class DataTable(models.Model):
    """A small named table of JSON rows that tools and code plans read and change (the demo store,
    the on-call desk). `key_field` names the field that identifies a row."""

    name = models.SlugField(max_length=50, unique=True)
    description = models.CharField(max_length=300, blank=True)
    key_field = models.CharField(max_length=50)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class DataRow(models.Model):
    table = models.ForeignKey(DataTable, on_delete=models.CASCADE, related_name="rows")
    key = models.CharField(max_length=100)
    data = models.JSONField()
    # Bumped on every change, so an approved diff can tell that a row moved since its snapshot.
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["table", "id"]
        constraints = [models.UniqueConstraint(fields=["table", "key"], name="unique_row_key_per_table")]

    def __str__(self):
        return f"{self.table.name}:{self.key}"


class DryRun(models.Model):
    """One run of a code plan against a snapshot of the tables: its result and the diff it proposes.
    Approvals of code plans bind to the code and this diff; applying it checks the snapshot still holds."""

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        APPLIED = "applied", "Applied"
        CONFLICT = "conflict", "Conflict: rows changed since the snapshot"
        SUPERSEDED = "superseded", "Superseded by a fresh dry run"

    plan_id = models.BigIntegerField(db_index=True)
    revision = models.PositiveIntegerField()
    code_hash = models.CharField(max_length=64)
    tables = models.JSONField(help_text="Names of the tables the code could use")
    result = models.JSONField(help_text="SandboxResult.as_dict()")
    effects = models.JSONField(default=list, help_text="The diff, each with the row it applies to")
    effects_hash = models.CharField(max_length=64)
    snapshot = models.JSONField(help_text="{table: [[row id, version], ...]} at the time of the run")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PROPOSED)
    message = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"Dry run of plan {self.plan_id} r{self.revision} ({self.status})"

    @property
    def succeeded(self) -> bool:
        return self.result.get("status") == "ok"
