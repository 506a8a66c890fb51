"""Two writes in one statement: a row inserted or updated alongside a conditional update, as a
PostgreSQL data-modifying CTE, so a durable transition costs fewer round trips. Both statements are
compiled by Django's own compilers (the fields convert their values as `save()` and `update()` would);
only the joining is ours. Elsewhere (SQLite) they run one after the other, in the caller's transaction."""

from django.db import IntegrityError, connection, transaction
from django.db.models import Model, QuerySet
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery, UpdateQuery


def _insert(obj: Model, on_conflict=None) -> tuple[str, tuple]:
    meta = obj._meta
    query = InsertQuery(type(obj), on_conflict=on_conflict)
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


def insert_then_update(obj: Model, rows: QuerySet, values: dict) -> bool:
    """Insert `obj` unless a row with one of its unique values exists already, and only if it was
    inserted, update `rows` (filtered) with `values`. Returns whether it was inserted (`obj` then has its
    pk). A conflict is not an error, so the caller's transaction goes on without a savepoint."""
    if connection.vendor != "postgresql":
        try:
            with transaction.atomic():
                obj.save(force_insert=True)
        except IntegrityError:
            return False
        rows.update(**values)
        return True
    insert_sql, insert_params = _insert(obj, on_conflict=OnConflict.IGNORE)
    update_sql, update_params = _update(rows, values)
    update, where = update_sql.split(" WHERE ", 1)  # a filtered update: the insert becomes part of its condition
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH inserted AS ({insert_sql}), "  # noqa: S608 - compiled by Django
            f"updated AS ({update} WHERE ({where}) AND EXISTS (SELECT 1 FROM inserted) RETURNING 1) "
            "SELECT (SELECT * FROM inserted)",
            insert_params + update_params,
        )
        (pk,) = cursor.fetchone()
    if pk is None:
        return False
    obj.pk = pk
    obj._state.adding, obj._state.db = False, connection.alias
    return True


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
