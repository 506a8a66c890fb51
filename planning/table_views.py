"""The data tables page: rows, CSV/JSON import, and the history of applied diffs (sandbox is a leaf,
so its pages live here)."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals import audit
from planning.forms import ImportForm
from sandbox import services
from sandbox.models import DataRow, DataTable, DryRun
from sandbox.runner import unavailable_reason


def _may_view(user) -> bool:
    return user.has_perm("planning.view_plan")


def _tables_context(request, *, form=None) -> dict:
    chosen = request.GET.get("table")
    all_tables = list(DataTable.objects.order_by("name"))
    current = next((t for t in all_tables if t.name == chosen), all_tables[0] if all_tables else None)
    page = Paginator(DataRow.objects.filter(table=current).order_by("id"), 50).get_page(request.GET.get("page", 1)) if current else None
    columns = sorted({key for row in page.object_list for key in row.data}) if page else []
    context = {
        "tables": all_tables,
        "current": current,
        "page": page,
        "columns": columns,
        "history": DryRun.objects.exclude(status=DryRun.Status.PROPOSED)
        .exclude(status=DryRun.Status.SUPERSEDED)
        .order_by("-created_at")[:30],
        "form": form or ImportForm(),
        "can_import": request.user.has_perm("sandbox.add_datarow"),
        "code_plans_unavailable": unavailable_reason(),
    }
    return context


@require_GET
def tables(request):
    if not _may_view(request.user):
        raise PermissionDenied("You may not view the data tables.")
    return render(request, "sandbox/tables.html", _tables_context(request))


def _import_refused(request, form: ImportForm, message: str | None = None):
    """The page again with the form as it was sent (a file input cannot be refilled; the rest is kept)."""
    if message:
        form.add_error(None, message)
    return render(request, "sandbox/tables.html", _tables_context(request, form=form), status=422)


def _uploaded_text(form: ImportForm) -> str:
    try:
        content = form.cleaned_data["file"].read(5_000_001).decode("utf-8")
    except UnicodeDecodeError:
        raise services.ImportProblem("The file is not UTF-8 text.") from None
    if len(content) > 5_000_000:
        raise services.ImportProblem("The file is larger than 5 MB.")
    return content


@require_POST
def table_import_preview(request):
    """What the import would do, shown beside the form (htmx keeps the chosen file in the form, so
    "Import" afterwards sends the same file); nothing is written."""
    if not request.user.has_perm("sandbox.add_datarow"):
        raise PermissionDenied("Only administrators can import data.")
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        if not request.htmx:
            return _import_refused(request, form)
        return render(request, "sandbox/_import_preview.html", {"form_errors": form.errors}, status=422)
    data = form.cleaned_data
    try:
        preview = services.table_import_preview(
            name=data["name"],
            key_field=data["key_field"],
            content=_uploaded_text(form),
            file_format=data["file_format"],
            replace=data["replace"],
        )
    except services.ImportProblem as problem:
        if not request.htmx:
            return _import_refused(request, form, str(problem))
        return render(request, "sandbox/_import_preview.html", {"problem": str(problem)}, status=422)
    if not request.htmx:
        return render(request, "sandbox/tables.html", {**_tables_context(request, form=form), "preview": preview})
    return render(request, "sandbox/_import_preview.html", {"preview": preview})


@require_POST
def table_import(request):
    if not request.user.has_perm("sandbox.add_datarow"):
        raise PermissionDenied("Only administrators can import data.")
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _import_refused(request, form)
    data = form.cleaned_data
    try:
        content = _uploaded_text(form)
        with transaction.atomic():
            table, count = services.table_import(
                name=data["name"], key_field=data["key_field"], content=content, file_format=data["file_format"], replace=data["replace"]
            )
            audit.record(action="table.imported", actor=request.user, data={"table": table.name, "rows": count, "replace": data["replace"]})
    except services.ImportProblem as problem:
        return _import_refused(request, form, str(problem))
    messages.success(request, f"Imported {count} row{'' if count == 1 else 's'} into {table.name}.")
    return redirect(f"/tables/?table={table.name}")
