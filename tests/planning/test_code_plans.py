"""Code as plan end to end: the LLM writes code, a dry run shows the diff, approval binds to code and
diff, applying changes the real tables in one transaction, and a conflict applies nothing."""

import pytest
from django.urls import reverse

from approvals.models import AuditEvent
from core.errors import ServiceError
from execution import engine
from planning import dry_runs, services
from planning.models import Plan
from planning.review import plan_decision_record
from sandbox.models import DataRow, DryRun
from tests.fixtures.code_plans import model_answer

HTMX = {"HX-Request": "true"}


@pytest.fixture
def store(demo_data, fake_openai):
    return fake_openai


def stock(item_id):
    return DataRow.objects.get(table__name="inventory", key=item_id).data["quantity_in_stock"]


def transactions():
    return [row.data for row in DataRow.objects.filter(table__name="transactions").order_by("id")]


def code_plan(store, alice, request_text) -> Plan:
    store.reply(model_answer())
    plan = services.plan_generate(plan_id=services.goal_submit(requester=alice, text=request_text, mode="code").pk)
    assert plan.status == Plan.Status.AWAITING_APPROVAL, plan.failure_reason
    dry_runs.dry_run_perform(plan.pk)
    return Plan.objects.get(pk=plan.pk)


def approve_and_apply(plan, bob, alice) -> Plan:
    dry = dry_runs.current_dry_run(plan)
    plan_decision_record(
        plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=dry_runs.approval_hash(plan, dry), decision="approved"
    )
    return engine.plan_run(plan_id=plan.pk, actor=alice)


def test_the_planner_asks_for_one_execute_python_block_following_the_lab_prompt(store, alice):
    plan = code_plan(store, alice, "Do you have any round sunglasses in stock under $100?")
    prompt = store.requests[0]["body"]["messages"][1]["content"]
    assert (
        "<execute_python>" in prompt
        and "Table inventory_tbl: description (str), item_id (str), name (str), price (int), quantity_in_stock (int)" in prompt
        and "insufficient_stock" in prompt
    )
    assert prompt.rstrip().endswith("Do you have any round sunglasses in stock under $100?")
    step = plan.steps.get()
    assert step.tool == "python_sandbox" and step.risk == "high" and step.args["tables"] == ["inventory", "transactions"]
    assert step.args["code"].startswith("# 1) Parse intent")


def test_round_sunglasses_under_100_answers_classic_at_60_with_no_diff(store, alice):
    dry = dry_runs.current_dry_run(code_plan(store, alice, "Do you have any round sunglasses in stock under $100?"))
    assert dry.result["status"] == "ok" and dry.result["code_status"] == "success"
    assert "Classic" in dry.result["answer_text"] and "$60" in dry.result["answer_text"]
    assert dry.effects == [] and "ACTION=read" in dry.result["stdout"]


def test_returning_two_aviators_raises_stock_and_writes_one_row_after_approval(store, alice, bob):
    plan = code_plan(store, alice, "Return 2 Aviator sunglasses")
    dry = dry_runs.current_dry_run(plan)
    assert [(e["table"], e["op"]) for e in dry.effects] == [("inventory", "update"), ("transactions", "insert")]
    assert stock("SG001") == 23, "nothing real changes before approval"
    plan = approve_and_apply(plan, bob, alice)
    assert plan.status == Plan.Status.SUCCEEDED and plan.answer_text.startswith("Done: returned 2 Aviator")
    assert stock("SG001") == 25 and len(transactions()) == 2 and transactions()[-1]["transaction_amount"] == -160
    assert AuditEvent.objects.filter(action="code.applied", plan_id=plan.pk).count() == 1


def test_purchasing_three_wayfarers_for_alice(store, alice, bob):
    plan = approve_and_apply(code_plan(store, alice, "Purchase 3 Wayfarer sunglasses for customer Alice"), bob, alice)
    assert plan.status == Plan.Status.SUCCEEDED
    assert stock("SG002") == 12
    assert transactions()[-1]["customer_name"] == "Alice" and transactions()[-1]["balance_after_transaction"] == 785


def test_two_items_make_two_rows_with_sequential_balances(store, alice, bob):
    approve_and_apply(code_plan(store, alice, "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses"), bob, alice)
    assert [t["balance_after_transaction"] for t in transactions()] == [500, 680, 760]
    assert stock("SG005") == 7 and stock("SG001") == 22


def test_a_request_beyond_stock_proposes_no_diff_and_says_insufficient_stock(store, alice):
    dry = dry_runs.current_dry_run(code_plan(store, alice, "Purchase 7 Moon sunglasses"))
    assert dry.result["code_status"] == "insufficient_stock" and dry.effects == []
    assert "only have 6" in dry.result["answer_text"]


def test_rows_changed_since_the_snapshot_apply_nothing_and_the_page_offers_a_fresh_dry_run(store, alice, bob, alice_client):
    from tools.registry import registry

    plan = code_plan(store, alice, "Purchase 3 Wayfarer sunglasses for customer Alice")
    dry = dry_runs.current_dry_run(plan)
    plan_decision_record(
        plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=dry_runs.approval_hash(plan, dry), decision="approved"
    )
    registry.get("purchase_item").call({"item": "Classic", "quantity": 1})  # someone sells a pair meanwhile
    before = transactions()
    plan = engine.plan_run(plan_id=plan.pk, actor=alice)
    assert plan.status == Plan.Status.AWAITING_APPROVAL
    assert transactions() == before and stock("SG002") == 15, "nothing was applied"
    assert DryRun.objects.get(pk=dry.pk).status == DryRun.Status.CONFLICT
    page = alice_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert "changed since the dry run; nothing was applied" in page and "Dry run again" in page
    assert AuditEvent.objects.filter(action="code.conflict", plan_id=plan.pk).exists()
    dry_runs.dry_run_refresh(plan_id=plan.pk, actor=alice)
    fresh = dry_runs.dry_run_perform(plan.pk)
    assert fresh.pk != dry.pk and fresh.status == DryRun.Status.PROPOSED
    assert fresh.effects[1]["after"]["balance_after_transaction"] == 560 + 285


def test_approval_binds_to_the_diff_shown(store, alice, bob):
    plan = code_plan(store, alice, "Return 2 Aviator sunglasses")
    with pytest.raises(ServiceError, match="dry-run diff changed"):
        plan_decision_record(plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=plan.content_hash, decision="approved")


def test_editing_the_code_makes_a_revision_that_needs_a_new_dry_run_and_approval(
    store, alice, bob, alice_client, django_capture_on_commit_callbacks
):
    plan = code_plan(store, alice, "Return 2 Aviator sunglasses")
    dry = dry_runs.current_dry_run(plan)
    plan_decision_record(
        plan_id=plan.pk, actor=bob, revision=plan.revision, content_hash=dry_runs.approval_hash(plan, dry), decision="approved"
    )
    form = alice_client.get(reverse("step_edit", args=[plan.pk, "code"]) + f"?revision={plan.revision}").content.decode()
    assert 'name="step-code-code"' in form
    data = {
        "step-code-revision": 1,
        "step-code-code": "answer_text = 'Nothing to do'\nSTATUS = 'unsupported_intent'\n",
        "step-code-tables": "inventory, transactions",
        "step-code-user_request": "Return 2 Aviator sunglasses",
    }
    with django_capture_on_commit_callbacks() as callbacks:
        response = alice_client.post(reverse("step_edit", args=[plan.pk, "code"]), data, headers=HTMX)
    assert response.status_code == 200, response.content.decode()[:500]
    plan.refresh_from_db()
    assert plan.revision == 2 and plan.status == Plan.Status.AWAITING_APPROVAL and dry_runs.current_dry_run(plan) is None
    assert len(callbacks) >= 1
    assert dry_runs.dry_run_perform(plan.pk).result["code_status"] == "unsupported_intent"


def test_code_that_breaks_the_policy_is_sent_back_for_repair(store, alice):
    store.reply("<execute_python>\nimport os\nos.system('id')\n</execute_python>")
    store.reply(model_answer())
    plan = services.plan_generate(plan_id=services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses", mode="code").pk)
    assert plan.status == Plan.Status.AWAITING_APPROVAL
    assert "import of 'os' is not allowed" in store.requests[1]["body"]["messages"][-1]["content"]


def test_the_plan_page_shows_code_with_line_numbers_and_the_dry_run_diff(store, alice, bob_client):
    plan = code_plan(store, alice, "Return 2 Aviator sunglasses")
    page = bob_client.get(reverse("plan_detail", args=[plan.pk])).content.decode()
    assert '<ol class="code"' in page and '<span class="kw">import</span>' in page
    assert "Dry run of revision 1" in page and "Proposed changes" in page and "&quot;quantity_in_stock&quot;: 25" in page
    assert dry_runs.approval_hash(plan, dry_runs.current_dry_run(plan)) in page
    assert "Approve revision 1" in page


def test_code_plans_need_an_llm(alice, no_llm, demo_data):
    with pytest.raises(ServiceError, match="Code plans are written by an LLM"):
        services.goal_submit(requester=alice, text="Return 2 Aviator sunglasses", mode="code")


def test_tables_page_lists_rows_and_applied_diffs(store, alice, bob, alice_client):
    approve_and_apply(code_plan(store, alice, "Return 2 Aviator sunglasses"), bob, alice)
    page = alice_client.get(reverse("tables") + "?table=inventory").content.decode()
    assert "Aviator" in page and "SG001" in page and "Applied" in page
    assert "Import rows" not in page


def test_admins_import_csv_and_json_all_or_nothing(client, db):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.conftest import make_user

    admin = make_user("root", "admin")
    client.force_login(admin)
    csv_file = SimpleUploadedFile("stock.csv", b"sku,name,price\nA1,Hat,10\nA2,Scarf,12.5\n")
    response = client.post(
        reverse("table_import"), {"name": "accessories", "key_field": "sku", "file_format": "csv", "file": csv_file}, follow=True
    )
    assert "Imported 2 rows into accessories" in response.content.decode()
    assert DataRow.objects.get(table__name="accessories", key="A2").data == {"sku": "A2", "name": "Scarf", "price": 12.5}
    bad = SimpleUploadedFile("stock.json", b'[{"sku": "B1"}, {"sku": "B1"}]')
    response = client.post(
        reverse("table_import"), {"name": "accessories", "key_field": "sku", "file_format": "json", "file": bad}, follow=True
    )
    assert "duplicate values" in response.content.decode() and DataRow.objects.filter(table__name="accessories").count() == 2
    assert AuditEvent.objects.filter(action="table.imported").count() == 1


def test_operators_cannot_import_tables(alice_client):
    response = alice_client.post(reverse("table_import"), {})
    assert response.status_code == 403
