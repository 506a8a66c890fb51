"""Importing rows on the Tables page: a refused import keeps what was typed and says why; counts read
as sentences; existing tables are offered by name."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from sandbox.models import DataRow
from tests.conftest import make_user


def _admin_client(client):
    admin = make_user("root", "admin")
    client.force_login(admin)
    return client


def test_a_refused_import_keeps_the_typed_fields_and_names_the_problem(client, db):
    client = _admin_client(client)
    bad = SimpleUploadedFile("stock.json", b'[{"sku": "B1"}, {"sku": "B1"}]')
    response = client.post(reverse("table_import"), {"name": "accessories", "key_field": "sku", "file_format": "json", "file": bad})
    page = response.content.decode()
    assert response.status_code == 422
    assert "duplicate values" in page
    assert 'value="accessories"' in page and 'value="sku"' in page
    assert not DataRow.objects.filter(table__name="accessories").exists()


def test_importing_one_row_says_one_row(client, db):
    client = _admin_client(client)
    one = SimpleUploadedFile("one.csv", b"sku,name\nA1,Hat\n")
    response = client.post(reverse("table_import"), {"name": "hats", "key_field": "sku", "file_format": "csv", "file": one}, follow=True)
    assert "Imported 1 row into hats." in response.content.decode()


def test_the_import_form_offers_the_existing_tables_by_name(client, db):
    client = _admin_client(client)
    client.post(
        reverse("table_import"),
        {"name": "hats", "key_field": "sku", "file_format": "csv", "file": SimpleUploadedFile("h.csv", b"sku\nA1\n")},
    )
    page = client.get(reverse("tables")).content.decode()
    assert 'list="existing-tables"' in page and '<option value="hats">' in page
