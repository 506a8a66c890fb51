"""Two writes in one statement: a row inserted or updated alongside a conditional update, as a
PostgreSQL data-modifying CTE, so a durable transition costs fewer round trips. Both statements are
compiled by Django's own compilers (the fields convert their values as `save()` and `update()` would);
only the joining is ours. Elsewhere (SQLite) they run one after the other, in the caller's transaction."""

from django.db import connection
from django.db.models import Model, QuerySet
from django.db.models.sql import InsertQuery, UpdateQuery


def _insert(obj: Model) -> tuple[str, tuple]:
    meta = obj._meta
    query = InsertQuery(type(obj))
    query.insert_values([field for field in meta.concrete_fields if field is not meta.auto_field], [obj])
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [meta.pk]
    [(sql, params)] = compiler.as_sql()
    return sql, tuple(params)


def _update(rows: QuerySet, values: dict) -> tuple[str, tuple]:
    query = rows.query.chain(UpdateQuery)
    query.add_update_values(values)
    sql, params = query.get_compiler(connection=connection).as_sql()
    return sql, tuple(params)


def insert_and_update(obj: Model, rows: QuerySet, values: dict) -> int:
    """Insert `obj` (setting its pk) and update `rows` with `values`; returns how many rows were updated.
    A constraint the insert breaks raises IntegrityError and nothing is written."""
    if connection.vendor != "postgresql":
        obj.save(force_insert=True)
        return rows.update(**values)
    insert_sql, insert_params = _insert(obj)
    update_sql, update_params = _update(rows, values)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH inserted AS ({insert_sql}), updated AS ({update_sql} RETURNING 1) "  # noqa: S608 - compiled by Django
            "SELECT (SELECT * FROM inserted), (SELECT count(*) FROM updated)",
            insert_params + update_params,
        )
        obj.pk, updated = cursor.fetchone()
    obj._state.adding, obj._state.db = False, connection.alias
    return updated


def update_both(first: QuerySet, first_values: dict, rows: QuerySet, values: dict) -> int:
    """Update `first` with `first_values` and `rows` with `values`; returns how many of `rows` changed."""
    if connection.vendor != "postgresql":
        first.update(**first_values)
        return rows.update(**values)
    first_sql, first_params = _update(first, first_values)
    update_sql, update_params = _update(rows, values)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH side AS ({first_sql} RETURNING 1) {update_sql}", first_params + update_params)
        return cursor.rowcount
