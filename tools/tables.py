"""Row access for tools that work on the demo data tables."""

from sandbox.models import DataRow, DataTable

from .registry import ToolError


def table(name: str) -> DataTable:
    found = DataTable.objects.filter(name=name).first()
    if found is None:
        raise ToolError(f"The {name!r} table does not exist. Run `python manage.py seed_demo`.")
    return found


def rows(name: str) -> list[dict]:
    return [row.data for row in DataRow.objects.filter(table__name=name).order_by("id")]


def locked_rows(name: str):
    """Rows locked for update (PostgreSQL): callers are inside a transaction and change them."""
    return DataRow.objects.select_for_update().filter(table__name=name).order_by("id")


def insert(name: str, data: dict) -> DataRow:
    target = table(name)
    return DataRow.objects.create(table=target, key=str(data[target.key_field]), data=data)


def save(row: DataRow, data: dict) -> None:
    row.data = data
    row.version += 1
    row.save(update_fields=["data", "version", "updated_at"])
