"""In a real browser: an administrator previews an import, then imports the same file without choosing it
again; the form's checkbox sits beside its label, as do a step's depends-on checkboxes."""

import pytest
from playwright.sync_api import expect

from sandbox.models import DataRow
from tests.conftest import make_user

pytestmark = pytest.mark.e2e
PASSWORD = "e2e-pass-123"


TEXT_BOX = """(label) => {
  const range = document.createRange();
  const text = [...label.childNodes].find((node) => node.nodeType === 3 && node.textContent.trim());
  range.selectNodeContents(text);
  const r = range.getBoundingClientRect();
  return {x: r.x, y: r.y, width: r.width, height: r.height};
}"""


def beside(page, checkbox, label) -> None:
    """The checkbox and its label's text share a line and nearly touch (no floating apart)."""
    box, text = checkbox.bounding_box(), label.evaluate(TEXT_BOX)
    assert box and text["width"], "both must be rendered"
    gap = max(text["x"] - (box["x"] + box["width"]), box["x"] - (text["x"] + text["width"]))
    assert -2 <= gap <= 16, f"{gap:.0f}px between the checkbox and its label"
    centre = lambda b: b["y"] + b["height"] / 2  # noqa: E731
    assert abs(centre(box) - centre(text)) <= 8, "checkbox and label are on different lines"


def test_preview_then_import_the_same_file(transactional_db, new_page, tmp_path):
    admin = make_user("root", "admin")
    admin.set_password(PASSWORD)
    admin.save()
    upload = tmp_path / "hats.csv"
    upload.write_text("sku,name\nA1,Straw hat\nA2,Bucket hat\n")

    page = new_page("root", PASSWORD)
    page.goto("/tables/")
    page.get_by_label("Table").fill("hats")
    page.get_by_label("Key field").fill("sku")
    page.get_by_label("Format").select_option("csv")
    page.get_by_label("File").set_input_files(str(upload))
    beside(page, page.get_by_label("Replace all existing rows"), page.locator("label", has_text="Replace all existing rows"))

    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#import-preview")
    expect(preview).to_contain_text("Preview: 2 rows for hats")
    expect(preview).to_contain_text("Bucket hat")
    assert not DataRow.objects.filter(table__name="hats").exists()

    page.get_by_role("button", name="Import").click()
    expect(page.locator(".messages")).to_contain_text("Imported 2 rows into hats.")
    assert DataRow.objects.filter(table__name="hats").count() == 2


def test_a_steps_depends_on_checkboxes_sit_beside_their_keys(transactional_db, new_page):
    from planning import services
    from planning.models import Goal, Plan
    from planning.validation import validate_plan
    from tests.fixtures.plans import step

    alice = make_user("alice", "operator")
    alice.set_password(PASSWORD)
    alice.save()
    plan = Plan.objects.create(goal=Goal.objects.create(text="Two steps", requester=alice), status=Plan.Status.AWAITING_APPROVAL)
    services.write_revision(
        plan, validate_plan({"steps": [step("s1", "noop"), step("s2", "noop")]}), author=None, planner="human", reason="t"
    )
    page = new_page("alice", PASSWORD)
    page.goto(f"/plans/{plan.pk}/")
    page.get_by_role("button", name="Edit step s2").click()
    form = page.locator("#step-s2 form")
    beside(page, form.get_by_label("s1"), form.locator("label", has_text="s1").last)
