"""Dry runs of code plans against table snapshots, and applying an approved diff in one transaction."""

import csv
import io
import json

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.canonical import sha256_of
from sandbox.models import DataRow, DataTable, DryRun
from sandbox.runner import run_code


class ApplyConflict(Exception):
    """The tables changed since the dry run's snapshot; nothing was applied."""


def snapshot(table_names: list[str]) -> tuple[dict[str, list[dict]], dict[str, list[list[int]]]]:
    rows = DataRow.objects.filter(table__name__in=table_names).select_related("table").order_by("id")
    tables: dict[str, list[dict]] = {name: [] for name in table_names}
    versions: dict[str, list[list[int]]] = {name: [] for name in table_names}
    for row in rows:
        tables[row.table.name].append(row.data)
        versions[row.table.name].append([row.pk, row.version])
    return tables, versions


def dry_run_create(*, plan_id: int, revision: int, code: str, table_names: list[str], user_request: str, timeout_s: float) -> DryRun:
    missing = sorted(set(table_names) - set(DataTable.objects.filter(name__in=table_names).values_list("name", flat=True)))
    tables, versions = snapshot([name for name in table_names if name not in missing])
    if missing:
        result = {
            "status": "error",
            "error": f"Unknown table(s): {', '.join(missing)}.",
            "effects": [],
            "answer_text": "",
            "code_status": "",
            "stdout": "",
        }
        effects = []
    else:
        outcome = run_code(code, tables=tables, user_request=user_request, timeout_s=timeout_s)
        result = outcome.as_dict()
        # Each update or delete remembers the row it came from (by position in the snapshot).
        effects = []
        for effect in outcome.effects:
            located = {k: v for k, v in effect.items() if k != "doc_id"}
            if effect["op"] != "insert":
                located["row_id"] = versions[effect["table"]][effect["doc_id"] - 1][0]
            effects.append(located)
    return DryRun.objects.create(
        plan_id=plan_id,
        revision=revision,
        code_hash=sha256_of(code),
        tables=table_names,
        result=result,
        effects=effects,
        effects_hash=sha256_of([{k: v for k, v in e.items() if k != "row_id"} for e in effects]),
        snapshot=versions,
    )


def dry_run_apply(*, dry_run: DryRun) -> int:
    """Apply the diff exactly as approved, or nothing at all (ApplyConflict) if any table it read changed."""
    with transaction.atomic():
        current = {name: [] for name in dry_run.tables}
        for row in DataRow.objects.select_for_update().filter(table__name__in=dry_run.tables).select_related("table").order_by("id"):
            current[row.table.name].append([row.pk, row.version])
        if current != dry_run.snapshot:
            changed = sorted(name for name in dry_run.tables if current.get(name) != dry_run.snapshot.get(name))
            raise ApplyConflict(
                f"Rows of {', '.join(changed)} changed since the dry run; nothing was applied. Run it again to see a fresh diff."
            )
        tables = {table.name: table for table in DataTable.objects.filter(name__in=dry_run.tables)}
        try:
            for effect in dry_run.effects:
                table = tables[effect["table"]]
                if effect["op"] == "update":
                    row = DataRow.objects.get(pk=effect["row_id"])
                    row.data, row.version = effect["after"], row.version + 1
                    row.key = str(effect["after"].get(table.key_field, row.key))
                    row.save(update_fields=["data", "version", "key", "updated_at"])
                elif effect["op"] == "delete":
                    DataRow.objects.filter(pk=effect["row_id"]).delete()
                else:
                    key = str(effect["after"].get(table.key_field) or f"row-{timezone.now().timestamp()}")
                    DataRow.objects.create(table=table, key=key, data=effect["after"])
        except IntegrityError:
            raise ApplyConflict("The diff would create two rows with the same key; nothing was applied.") from None
        DryRun.objects.filter(pk=dry_run.pk).update(status=DryRun.Status.APPLIED, applied_at=timezone.now())
    return len(dry_run.effects)


def mark_conflict(*, dry_run: DryRun, message: str) -> None:
    DryRun.objects.filter(pk=dry_run.pk).update(status=DryRun.Status.CONFLICT, message=message[:300])


class ImportProblem(Exception):
    pass


def _parse_rows(*, key_field: str, content: str, file_format: str) -> tuple[list[dict], list[str]]:
    """The rows and their keys, checked as an import checks them; ImportProblem otherwise."""
    try:
        if file_format == "json":
            rows = json.loads(content)
        else:
            rows = list(csv.DictReader(io.StringIO(content)))
            rows = [{k: _number_or_text(v) for k, v in row.items()} for row in rows]
    except (json.JSONDecodeError, csv.Error, UnicodeDecodeError) as error:
        raise ImportProblem(f"The file could not be read as {file_format.upper()}: {error}") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ImportProblem("The file must hold a list of rows (JSON objects, or CSV with a header line).")
    if len(rows) > 10_000:
        raise ImportProblem("At most 10,000 rows can be imported at once.")
    keys = [str(row.get(key_field, "")) for row in rows]
    if any(not key for key in keys):
        raise ImportProblem(f"Every row needs a value in the key field {key_field!r}.")
    if len(set(keys)) != len(keys):
        raise ImportProblem(f"Key field {key_field!r} has duplicate values.")
    return rows, keys


def table_import(
    *, name: str, key_field: str, content: str, file_format: str, replace: bool, description: str = ""
) -> tuple[DataTable, int]:
    """Load rows from CSV or JSON (a list of objects) into a table; all rows or none."""
    rows, keys = _parse_rows(key_field=key_field, content=content, file_format=file_format)
    with transaction.atomic():
        table, _ = DataTable.objects.get_or_create(name=name, defaults={"key_field": key_field, "description": description})
        if replace:
            table.rows.all().delete()
        elif table.rows.filter(key__in=keys).exists():
            raise ImportProblem("Some keys already exist in the table; choose 'replace' or import new keys only.")
        DataRow.objects.bulk_create([DataRow(table=table, key=key, data=row) for key, row in zip(keys, rows, strict=True)])
    return table, len(rows)


PREVIEW_ROWS = 10


def table_import_preview(*, name: str, key_field: str, content: str, file_format: str, replace: bool) -> dict:
    """What importing this file would do, without doing it: the row count, columns, the first rows, and
    what happens to the table (created, added to, or replaced; keys that already exist)."""
    rows, keys = _parse_rows(key_field=key_field, content=content, file_format=file_format)
    table = DataTable.objects.filter(name=name).first()
    existing = table.rows.count() if table else 0
    clashing = table.rows.filter(key__in=keys).count() if table and not replace else 0
    columns = list(dict.fromkeys(column for row in rows[:PREVIEW_ROWS] for column in row))
    return {
        "count": len(rows),
        "columns": columns,
        "rows": [[row.get(column, "") for column in columns] for row in rows[:PREVIEW_ROWS]],
        "table": name,
        "new_table": table is None,
        "existing": existing,
        "replace": replace,
        "clashing": clashing,
    }


def _number_or_text(value):
    if value is None:
        return ""
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            continue
    return value
