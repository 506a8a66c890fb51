from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("planning", "0005_llm_usage_and_budgets"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="tool_hash",
            field=models.CharField(
                blank=True, help_text="Definition hash of the tool when the step was written (from the registry)", max_length=64
            ),
        ),
    ]
