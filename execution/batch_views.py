"""The inbox's batch form: approve or deny the selected gates at once."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from execution.batch import gate_decisions_record


def _selected(request) -> list[dict]:
    """Each checkbox value is `plan_id:step_key:gate_hash`, the gate as the page showed it."""
    approve = request.POST.get("approve") == "yes"
    comment = request.POST.get("comment", "")
    selected = []
    for value in request.POST.getlist("gate"):
        plan_id, _, rest = value.partition(":")
        step_key, _, gate_hash = rest.partition(":")
        if plan_id.isdigit() and step_key:
            selected.append({"plan_id": int(plan_id), "step_key": step_key, "gate_hash": gate_hash, "approve": approve, "comment": comment})
    return selected


@login_required
@require_POST
def gate_batch_decide(request):
    outcomes = gate_decisions_record(actor=request.user, decisions=_selected(request))
    if not outcomes:
        messages.error(request, "Select at least one gate.")
    for outcome in outcomes:
        text = f"Plan {outcome['plan_id']} step {outcome['step_key']}: {outcome['detail']}"
        (messages.success if outcome["ok"] else messages.error)(request, text)
    if request.headers.get("HX-Request"):
        return HttpResponseClientRedirect(reverse("inbox"))
    return redirect("inbox")
