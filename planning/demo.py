"""Demo data: users, the sunglasses store and on-call desk tables, and the playbooks for the demo goals.
`seed_demo` creates what is missing and never changes what exists, so running it twice changes nothing."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from core.roles import DEMO_USERS
from planning.models import Playbook
from sandbox.models import DataRow, DataTable

INVENTORY = [
    {
        "item_id": "SG001",
        "name": "Aviator",
        "description": "Classic aviator frame with teardrop lenses and a thin metal bridge.",
        "quantity_in_stock": 23,
        "price": 80,
    },
    {
        "item_id": "SG002",
        "name": "Wayfarer",
        "description": "Bold acetate wayfarer with a trapezoid shape, an everyday favourite.",
        "quantity_in_stock": 15,
        "price": 95,
    },
    {
        "item_id": "SG003",
        "name": "Moon",
        "description": "Oversized round frame with gradient lenses for a retro look.",
        "quantity_in_stock": 6,
        "price": 120,
    },
    {
        "item_id": "SG004",
        "name": "Sport",
        "description": "Wraparound sport frame with polarized lenses, light and sweat proof.",
        "quantity_in_stock": 12,
        "price": 110,
    },
    {
        "item_id": "SG005",
        "name": "Classic",
        "description": "Classic round profile with minimalist metal frames, offering a timeless and versatile style that fits both casual and formal wear.",
        "quantity_in_stock": 10,
        "price": 60,
    },
    {
        "item_id": "SG006",
        "name": "Catseye",
        "description": "Cat-eye acetate frame with upswept corners.",
        "quantity_in_stock": 0,
        "price": 75,
    },
]

OPENING_BALANCE = {
    "transaction_id": "TXN001",
    "customer_name": "OPENING_BALANCE",
    "transaction_summary": "Opening balance",
    "transaction_amount": 500.0,
    "balance_after_transaction": 500.0,
    "timestamp": "2026-01-01T09:00:00+00:00",
}

TICKETS = [
    {"ticket_id": f"SUP-{100 + n}", "queue": "support", "title": title, "status": status}
    for n, (title, status) in enumerate(
        [
            ("Checkout page times out", "open"),
            ("Refund not received", "open"),
            ("Password reset email missing", "open"),
            ("Order shows wrong size", "open"),
            ("Cannot apply discount code", "open"),
            ("Delivery address change", "open"),
            ("Invoice PDF is blank", "open"),
            ("App crashes on login", "open"),
            ("Tracking link broken", "open"),
            ("Duplicate charge", "open"),
            ("Damaged item on arrival", "open"),
            ("Account locked", "open"),
            ("Gift card balance wrong", "closed"),
            ("Newsletter unsubscribe", "closed"),
            ("Size chart question", "closed"),
        ]
    )
]

DESK_SETTINGS = [
    {"setting": "sla_max_open_tickets", "value": {"support": 10, "billing": 5}},
    {"setting": "on_call_engineer", "value": {"name": "Dana Reyes", "email": "dana.oncall@example.com"}},
]

TABLES = [
    ("inventory", "item_id", "Sunglasses store inventory", INVENTORY),
    ("transactions", "transaction_id", "Store transactions with running balance", [OPENING_BALANCE]),
    ("tickets", "ticket_id", "On-call desk tickets", TICKETS),
    ("oncall_desk", "setting", "On-call desk settings: SLA thresholds and the on-call engineer", DESK_SETTINGS),
    ("notifications", "notification_id", "Notifications sent to the on-call engineer", []),
]

ONCALL_GOAL = "Check open ticket count against the SLA and notify the on-call engineer if breached"

PLAYBOOKS = [
    {
        "name": "On-call SLA check",
        "goal_text": ONCALL_GOAL + " (Check Jira ticket count, compare with SLA, and notify on-call engineer if breached)",
        "steps": [
            {"key": "s1", "title": "Count open support tickets", "tool": "count_open_tickets", "args": {"queue": "support"}},
            {"key": "s2", "title": "Read the SLA threshold", "tool": "get_sla_threshold", "args": {"queue": "support"}},
            {
                "key": "s3",
                "title": "Notify the on-call engineer",
                "description": "Only when the open ticket count is above the SLA threshold.",
                "tool": "notify_on_call",
                "args": {
                    "message": "SLA breached: {{ steps.s1.output }} open support tickets, threshold is {{ steps.s2.output }}.",
                    "severity": "warning",
                },
                "depends_on": ["s1", "s2"],
                "condition": "steps.s1.output > steps.s2.output",
                "success_criteria": "The on-call engineer has been emailed.",
            },
        ],
    },
    {
        "name": "Find sunglasses by shape and price",
        "goal_text": "Do you have any round sunglasses in stock under $100?",
        "steps": [
            {
                "key": "s1",
                "title": "Search the inventory",
                "tool": "search_inventory",
                "args": {"keywords": "{{ goal.keywords | [] }}", "max_price": "{{ goal.max_price | null }}", "in_stock_only": True},
                "success_criteria": "Matching items in stock are listed.",
            }
        ],
    },
    {
        "name": "Return sunglasses",
        "goal_text": "Return 2 Aviator sunglasses",
        "steps": [
            {"key": "s1", "title": "Look up the item", "tool": "get_item", "args": {"item": "{{ goal.item | Aviator }}"}},
            {
                "key": "s2",
                "title": "Take back the pairs and refund",
                "tool": "return_item",
                "args": {
                    "item": "{{ steps.s1.output.item_id }}",
                    "quantity": "{{ goal.quantity | 1 }}",
                    "customer_name": "{{ goal.customer | Walk-in customer }}",
                },
                "depends_on": ["s1"],
                "success_criteria": "Stock is up and one refund row is recorded.",
            },
        ],
    },
    {
        "name": "Purchase sunglasses",
        "goal_text": "Purchase 3 Wayfarer sunglasses for customer Alice",
        "steps": [
            {"key": "s1", "title": "Check the item and its stock", "tool": "get_item", "args": {"item": "{{ goal.item | Wayfarer }}"}},
            {
                "key": "s2",
                "title": "Sell the pairs",
                "tool": "purchase_item",
                "args": {
                    "item": "{{ steps.s1.output.item_id }}",
                    "quantity": "{{ goal.quantity | 1 }}",
                    "customer_name": "{{ goal.customer | Walk-in customer }}",
                },
                "depends_on": ["s1"],
                "condition": "steps.s1.output.quantity_in_stock >= {{ goal.quantity | 1 }}",
                "success_criteria": "Stock is down and one transaction row is recorded.",
            },
        ],
    },
    {
        "name": "Purchase two kinds of sunglasses",
        "goal_text": "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses",
        "steps": [
            {"key": "s1", "title": "Check the first item", "tool": "get_item", "args": {"item": "{{ goal.items.0.name | Classic }}"}},
            {"key": "s2", "title": "Check the second item", "tool": "get_item", "args": {"item": "{{ goal.items.1.name | Aviator }}"}},
            {
                "key": "s3",
                "title": "Sell the first item",
                "tool": "purchase_item",
                "args": {
                    "item": "{{ steps.s1.output.item_id }}",
                    "quantity": "{{ goal.items.0.quantity | 1 }}",
                    "customer_name": "{{ goal.customer | Walk-in customer }}",
                },
                "depends_on": ["s1", "s2"],
                "condition": "steps.s1.output.quantity_in_stock >= {{ goal.items.0.quantity | 1 }} and steps.s2.output.quantity_in_stock >= {{ goal.items.1.quantity | 1 }}",
                "success_criteria": "One transaction row for this item.",
            },
            {
                "key": "s4",
                "title": "Sell the second item",
                "description": "After the first sale, so the running balance is sequential.",
                "tool": "purchase_item",
                "args": {
                    "item": "{{ steps.s2.output.item_id }}",
                    "quantity": "{{ goal.items.1.quantity | 1 }}",
                    "customer_name": "{{ goal.customer | Walk-in customer }}",
                },
                "depends_on": ["s2", "s3"],
                "success_criteria": "One transaction row for this item.",
            },
        ],
    },
]


@transaction.atomic
def seed_demo() -> dict[str, int]:
    """Create whatever demo data is missing; returns how many rows of each kind were created."""
    created = {"users": 0, "tables": 0, "rows": 0, "playbooks": 0}
    User = get_user_model()
    for username, role, password in DEMO_USERS:
        if User.objects.filter(username=username).exists():
            continue
        user = User.objects.create_user(username=username, password=password, email=f"{username}@example.com")
        if role == "admin":
            user.is_staff = user.is_superuser = True
            user.save(update_fields=["is_staff", "is_superuser"])
        user.groups.add(Group.objects.get(name=role))
        created["users"] += 1
    for name, key_field, description, rows in TABLES:
        table, made = DataTable.objects.get_or_create(name=name, defaults={"key_field": key_field, "description": description})
        if made:
            created["tables"] += 1
            DataRow.objects.bulk_create([DataRow(table=table, key=str(row[key_field]), data=row) for row in rows])
            created["rows"] += len(rows)
    for playbook in PLAYBOOKS:
        _, made = Playbook.objects.get_or_create(
            name=playbook["name"], defaults={"goal_text": playbook["goal_text"], "steps": playbook["steps"]}
        )
        created["playbooks"] += int(made)
    return created
