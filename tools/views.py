"""The Tools page: the catalogue for everybody with a role; sources, sync and overrides for admins."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.middleware import HtmxDetails

from core.errors import ServiceError
from core.roles import user_can
from tools import selectors, services
from tools.forms import OverrideForm, SourceForm
from tools.models import ToolSource
from tools.registry import registry


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _reader(request) -> bool:
    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view tools.")
    return selectors.can_manage_tools(request.user)


def _admin(request) -> None:
    if not selectors.can_manage_tools(request.user):
        raise PermissionDenied("Only admins manage tool sources.")


def _context(request, **extra) -> dict:
    is_admin = selectors.can_manage_tools(request.user)
    registry.refresh()
    rows = selectors.definitions_by_name()
    tools = [
        {"tool": tool, "row": rows.get(tool.name), "diff": selectors.definition_diff(rows[tool.name]) if tool.name in rows else ""}
        for tool in registry.all()
    ]
    removed = [row for row in rows.values() if registry.get(row.full_name) is None]
    context = {"tools": tools, "removed": removed, "is_admin": is_admin, "sources": selectors.sources() if is_admin else []}
    context.update({"source_form": SourceForm(), "override_form": OverrideForm(), **extra})
    return context


def _render(request: HtmxHttpRequest, status: int = 200, **extra) -> HttpResponse:
    template = "tools/tools.html#tools-body" if request.htmx else "tools/tools.html"
    return render(request, template, _context(request, **extra), status=status)


@require_GET
def tools_page(request: HtmxHttpRequest):
    _reader(request)
    return _render(request)


def _perform(request: HtmxHttpRequest, action, *, done: str) -> HttpResponse:
    try:
        result = action()
    except ServiceError as error:
        if not request.htmx:
            messages.error(request, error.message)
            return redirect("tools")
        return _render(request, status=error.status, error=error.message)
    message = done(result) if callable(done) else done
    if not request.htmx:
        messages.success(request, message)
        return redirect("tools")
    return _render(request, flash=message)


def _report_text(report) -> str:
    if report is None:
        return "Source added, but its first sync failed; see the source's status."
    parts = [
        f"{label}: {', '.join(names) or '-'}"
        for label, names in (("added", report.added), ("changed", report.changed), ("removed", report.removed))
    ]
    return f"Synced {report.source}. " + "; ".join(parts)


@require_POST
def source_add(request: HtmxHttpRequest):
    _admin(request)
    form = SourceForm(request.POST)
    if not form.is_valid():
        return _render(request, status=422, source_form=form, error="Check the source's fields.")

    def add():
        headers = services.parse_pairs(form.header_lines(), what="header", pattern=services.HEADER_NAME)
        data = form.cleaned_data
        return services.tool_source_create(
            actor=request.user,
            name=data["name"],
            stdio=data["stdio"].strip(),
            url=data["url"].strip(),
            headers=headers,
            trusted=data["trusted"],
        )

    return _perform(request, add, done=lambda result: _report_text(result[1]))


@require_POST
def source_sync(request: HtmxHttpRequest, name: str):
    _admin(request)
    source = get_object_or_404(ToolSource, name=name)
    return _perform(request, lambda: services.tool_source_sync(source=source, actor=request.user), done=_report_text)


@require_POST
def tool_override(request: HtmxHttpRequest, tool_name: str):
    _admin(request)
    form = OverrideForm(request.POST)
    if not form.is_valid():
        return _render(request, status=422, error="An override needs a reason.")
    return _perform(
        request,
        lambda: services.tool_override(actor=request.user, tool_name=tool_name, **form.values()),
        done=f"Override of {tool_name} saved.",
    )
