from datetime import timedelta

from django.conf import settings
from django.db import migrations, models


def expire_existing_tokens(apps, schema_editor):
    """Tokens issued before expiry existed get the default lifetime, counted from when they were issued."""
    ApiToken = apps.get_model("approvals", "ApiToken")
    lifetime = timedelta(days=settings.COUNTERSIGN_TOKEN_DAYS)
    for token in ApiToken.objects.filter(expires_at__isnull=True):
        token.expires_at = token.created_at + lifetime
        token.save(update_fields=["expires_at"])


class Migration(migrations.Migration):
    dependencies = [("approvals", "0003_audit_append_only_trigger")]

    operations = [
        migrations.AlterModelOptions(name="apitoken", options={"ordering": ["-created_at"]}),
        migrations.AddField(model_name="apitoken", name="expires_at", field=models.DateTimeField(null=True)),
        migrations.AddField(model_name="apitoken", name="revoked_at", field=models.DateTimeField(blank=True, null=True)),
        migrations.RunPython(expire_existing_tokens, migrations.RunPython.noop),
        migrations.AlterField(model_name="apitoken", name="expires_at", field=models.DateTimeField()),
    ]
