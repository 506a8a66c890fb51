import pytest

from planning.expressions import ExpressionError, evaluate_condition, resolve_templates
from planning.validation import PlanInvalid, validate_plan


def step(key, tool="count_open_tickets", args=None, **extra):
    return {"key": key, "title": f"Step {key}", "tool": tool, "args": {"queue": "support"} if args is None else args, **extra}


def issues_of(plan):
    with pytest.raises(PlanInvalid) as invalid:
        validate_plan(plan)
    return [str(issue) for issue in invalid.value.issues]


def test_a_valid_plan_comes_back_with_risk_from_the_registry():
    steps = validate_plan(
        {"steps": [step("s1"), step("s2", "notify_on_call", {"message": "{{ steps.s1.output }} open"}, depends_on=["s1"])]}
    )
    assert [s["risk"] for s in steps] == ["low", "high"]


def test_a_risk_claimed_in_the_plan_is_ignored():
    steps = validate_plan({"steps": [step("s1", "purchase_item", {"item": "Aviator", "quantity": 1}, risk="low")]})
    assert steps[0]["risk"] == "high"


@pytest.mark.parametrize(
    "plan, expected",
    [
        ({"steps": [step("s1", "launch_rockets", {})]}, "step s1, tool: unknown tool 'launch_rockets'"),
        ({"steps": [step("s1", args={"queue": 7})]}, "step s1, args: queue: Input should be a valid string"),
        ({"steps": [step("s1", "purchase_item", {"item": "Aviator"})]}, "step s1, args: quantity: Field required"),
        ({"steps": [step("s1", args={"queue": "x", "extra": 1})]}, "step s1, args: extra: Extra inputs are not permitted"),
        ({"steps": [step("s1"), step("s1")]}, "step s1, key: duplicate key 's1'"),
        ({"steps": [step("s1", depends_on=["s7"])]}, "step s1, depends_on: depends on 's7', which is not a step of this plan"),
        ({"steps": [step("s1", depends_on=["s1"])]}, "step s1, depends_on: a step cannot depend on itself"),
        ({"steps": [step("s1", depends_on=["s2"]), step("s2", depends_on=["s1"])]}, "dependency cycle"),
        (
            {"steps": [step("s1"), step("s2", "notify_on_call", {"message": "{{ steps.s1.output }}"})]},
            "uses the output of 's1', which is not among its dependencies",
        ),
        (
            {"steps": [step("s1"), step("s2", condition="steps.s1.output > 3")]},
            "condition: refers to 's1', which is not among its dependencies",
        ),
        ({"steps": [step("s1"), step("s2", depends_on=["s1"], condition="steps.s1.output >")]}, "Condition is not a valid expression"),
        ({"steps": [step("s1"), step("s2", depends_on=["s1"], condition="__import__('os').system('id')")]}, "not allowed in a condition"),
        ({"steps": [step("s1", "notify_on_call", {"message": "{{ config.SECRET_KEY }}"})]}, "must look like {{ steps.KEY.output.field }}"),
        ({"steps": []}, "the plan has no steps"),
        ({"plan": []}, 'the plan must be a JSON object with a "steps" list'),
        ({"steps": [step(f"s{i}") for i in range(31)]}, "the plan has 31 steps; at most 30 are allowed"),
        ({"steps": [{**step("s1"), "title": "x" * 201}]}, "step s1, title: String should have at most 200 characters"),
        ({"steps": [{**step("s1"), "key": "1 bad key"}]}, "key: String should match pattern"),
        ({"steps": ["not an object"]}, "step #1"),
    ],
)
def test_invalid_plans_get_readable_errors_at_the_step_they_concern(plan, expected):
    assert any(expected in issue for issue in issues_of(plan)), issues_of(plan)


def test_a_transitive_dependency_may_be_referenced():
    plan = {
        "steps": [
            step("s1"),
            step("s2", depends_on=["s1"]),
            step("s3", "notify_on_call", {"message": "{{ steps.s1.output }}"}, depends_on=["s2"]),
        ]
    }
    assert len(validate_plan(plan)) == 3


def test_a_whole_template_may_stand_for_a_typed_argument():
    plan = {
        "steps": [
            step("s1", "get_item", {"item": "Aviator"}),
            step(
                "s2",
                "purchase_item",
                {"item": "{{ steps.s1.output.item_id }}", "quantity": "{{ steps.s1.output.quantity_in_stock }}"},
                depends_on=["s1"],
            ),
        ]
    }
    assert validate_plan(plan)[1]["args"]["quantity"] == "{{ steps.s1.output.quantity_in_stock }}"


def test_every_problem_is_reported_at_once():
    plan = {"steps": [step("s1", "nope", {}), step("s2", depends_on=["zz"])]}
    assert len(issues_of(plan)) == 2


@pytest.mark.parametrize(
    "condition, outputs, expected",
    [
        ("steps.s1.output > steps.s2.output", {"s1": 12, "s2": 10}, True),
        ("steps.s1.output > steps.s2.output", {"s1": 3, "s2": 10}, False),
        ("steps.s1.output.count >= 1 and not steps.s2.output.closed", {"s1": {"count": 1}, "s2": {"closed": False}}, True),
        ("len(steps.s1.output['items']) == 0", {"s1": {"items": []}}, True),
        ("steps.s1.output.name in ['Aviator', 'Classic']", {"s1": {"name": "Classic"}}, True),
        ("steps.s1.output * 2 - 1 == 5", {"s1": 3}, True),
    ],
)
def test_conditions_evaluate_over_dependency_outputs(condition, outputs, expected):
    assert evaluate_condition(condition, outputs) is expected


@pytest.mark.parametrize(
    "condition",
    [
        "().__class__.__bases__",
        "steps.s1.output.__class__",
        "open('/etc/passwd')",
        "[x for x in steps]",
        "lambda: 1",
        "steps.s1.output ** 99999999",
        "f'{steps}'",
    ],
)
def test_conditions_refuse_anything_beyond_the_allowlist(condition):
    with pytest.raises(ExpressionError):
        evaluate_condition(condition, {"s1": 1})


def test_templates_resolve_typed_when_whole_and_as_text_when_embedded():
    outputs = {"s1": {"item_id": "SG001", "quantity_in_stock": 4}}
    args = {
        "item": "{{ steps.s1.output.item_id }}",
        "quantity": "{{ steps.s1.output.quantity_in_stock }}",
        "note": "left: {{ steps.s1.output.quantity_in_stock }}",
    }
    assert resolve_templates(args, outputs) == {"item": "SG001", "quantity": 4, "note": "left: 4"}
