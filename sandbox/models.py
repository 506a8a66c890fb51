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
