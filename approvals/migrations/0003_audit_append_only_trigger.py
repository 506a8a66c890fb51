from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION countersign_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only: % on approvals_auditevent is refused', TG_OP;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS approvals_auditevent_append_only ON approvals_auditevent;
CREATE TRIGGER approvals_auditevent_append_only BEFORE UPDATE OR DELETE ON approvals_auditevent
    FOR EACH ROW EXECUTE FUNCTION countersign_audit_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS approvals_auditevent_append_only ON approvals_auditevent;
DROP FUNCTION IF EXISTS countersign_audit_append_only();
"""


def create(apps, schema_editor):
    # PostgreSQL only: SQLite is for development, and its test flush deletes rows.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0002_audit_actor_protect")]

    operations = [migrations.RunPython(create, drop)]
