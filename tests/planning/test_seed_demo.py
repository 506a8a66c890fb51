from django.contrib.auth.models import Group, User
from django.core.management import call_command

from planning.models import Playbook
from sandbox.models import DataRow, DataTable


def snapshot():
    return {
        "users": sorted(
            (u.username, u.password, u.is_superuser, tuple(sorted(u.groups.values_list("name", flat=True)))) for u in User.objects.all()
        ),
        "tables": sorted(DataTable.objects.values_list("name", "key_field")),
        "rows": sorted((r.table.name, r.key, str(r.data), r.version) for r in DataRow.objects.select_related("table")),
        "playbooks": sorted((p.name, str(p.steps)) for p in Playbook.objects.all()),
    }


def test_seed_demo_creates_the_demo_users_tables_and_playbooks(db):
    call_command("seed_demo")
    assert {u.username: [g.name for g in u.groups.all()] for u in User.objects.all()} == {
        "alice": ["operator"],
        "bob": ["approver"],
        "carol": ["auditor"],
        "admin": ["admin"],
    }
    assert User.objects.get(username="admin").is_superuser
    assert set(DataTable.objects.values_list("name", flat=True)) >= {"inventory", "transactions", "tickets", "oncall_desk"}
    opening = DataRow.objects.get(table__name="transactions").data
    assert opening["balance_after_transaction"] == 500
    assert Playbook.objects.count() == 5


def test_running_seed_demo_twice_changes_nothing(db, capsys):
    call_command("seed_demo")
    before = snapshot()
    call_command("seed_demo")
    assert snapshot() == before
    assert "nothing changed" in capsys.readouterr().out


def test_seed_demo_leaves_changed_demo_data_alone(db):
    call_command("seed_demo")
    row = DataRow.objects.get(table__name="inventory", key="SG001")
    row.data = {**row.data, "quantity_in_stock": 1}
    row.save()
    call_command("seed_demo")
    assert DataRow.objects.get(pk=row.pk).data["quantity_in_stock"] == 1


def test_role_groups_hold_the_permissions_their_role_implies(db):
    perms = {
        g.name: {f"{p.content_type.app_label}.{p.codename}" for p in g.permissions.select_related("content_type")}
        for g in Group.objects.all()
    }
    assert {"planning.add_goal", "planning.change_plan", "planning.run_plan"} <= perms["operator"]
    assert "planning.approve_plan" not in perms["operator"]
    assert "planning.approve_plan" in perms["approver"] and "planning.change_plan" not in perms["approver"]
    assert perms["auditor"] == {"planning.view_goal", "planning.view_plan", "approvals.view_auditevent"}
    assert perms["admin"] >= perms["operator"] | perms["approver"] | perms["auditor"]
