from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("planning", "0008_plan_changes_requested"),
    ]

    operations = [
        migrations.AlterField(
            model_name="plan",
            name="status",
            field=models.CharField(
                choices=[
                    ("planning", "Planning"),
                    ("planning_failed", "Planning failed"),
                    ("awaiting_approval", "Awaiting approval"),
                    ("changes_requested", "Changes requested"),
                    ("approved", "Approved"),
                    ("rejected", "Rejected"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("partially_completed", "Partially completed"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("superseded", "Superseded"),
                    ("expired", "Expired"),
                ],
                db_index=True,
                default="planning",
                max_length=20,
            ),
        ),
    ]
