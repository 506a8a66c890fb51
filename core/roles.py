"""The four roles and what each may do. Groups are (re)built after every migrate from this table."""

# The demo users `seed_demo` creates; `make run` prints these logins. For a local demo only.
DEMO_USERS = [
    ("alice", "operator", "countersign-alice"),
    ("bob", "approver", "countersign-bob"),
    ("carol", "auditor", "countersign-carol"),
    ("admin", "admin", "countersign-admin"),
]

ROLE_PERMISSIONS: dict[str, list[str]] = {
    "operator": [
        "planning.add_goal",
        "planning.view_goal",
        "planning.view_plan",
        "planning.change_plan",
        "planning.run_plan",
    ],
    "approver": [
        "planning.view_goal",
        "planning.view_plan",
        "planning.approve_plan",
        "planning.add_playbook",
    ],
    "auditor": [
        "planning.view_goal",
        "planning.view_plan",
        "approvals.view_auditevent",
    ],
}
ROLE_PERMISSIONS["admin"] = sorted({perm for perms in ROLE_PERMISSIONS.values() for perm in perms} | {"sandbox.add_datarow"})

# Capability name -> permission that grants it; templates use the names to hide controls.
CAPABILITIES = {
    "submit": "planning.add_goal",
    "view": "planning.view_plan",
    "edit": "planning.change_plan",
    "run": "planning.run_plan",
    "approve": "planning.approve_plan",
    "audit": "approvals.view_auditevent",
}


def roles_of(user) -> frozenset[str]:
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    return frozenset(name for name, perm in CAPABILITIES.items() if user.has_perm(perm))


def sync_role_groups(**kwargs) -> None:
    """post_migrate handler: make each role group hold exactly the permissions listed above."""
    # Imported here, not at the top: devstack reads DEMO_USERS before Django is set up.
    from django.contrib.auth.models import Group, Permission

    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = []
        for dotted in perms:
            app_label, codename = dotted.split(".")
            permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if permission is not None:
                wanted.append(permission)
        group.permissions.set(wanted)


def user_can(user, capability: str) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(CAPABILITIES[capability]))
