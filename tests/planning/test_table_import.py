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


HTMX = {"HX-Request": "true"}


def test_a_preview_shows_the_rows_and_what_would_happen_and_writes_nothing(client, db):
    client = _admin_client(client)
    rows = "sku,name\n" + "".join(f"A{n},Hat {n}\n" for n in range(12))
    upload = SimpleUploadedFile("hats.csv", rows.encode())
    response = client.post(
        reverse("table_import_preview"), {"name": "hats", "key_field": "sku", "file_format": "csv", "file": upload}, headers=HTMX
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "Preview: 12 rows for hats" in page and "A new table hats will be created." in page
    assert '<th scope="col">sku</th>' in page and "<td>Hat 0</td>" in page and "<td>Hat 9</td>" in page
    assert "<td>Hat 10</td>" not in page and "the first 10 are shown" in page
    assert not DataRow.objects.filter(table__name="hats").exists()


def test_a_preview_warns_about_keys_that_already_exist(client, db):
    client = _admin_client(client)
    client.post(
        reverse("table_import"),
        {"name": "hats", "key_field": "sku", "file_format": "csv", "file": SimpleUploadedFile("h.csv", b"sku\nA1\n")},
    )
    again = SimpleUploadedFile("h.csv", b"sku\nA1\nA2\n")
    page = client.post(
        reverse("table_import_preview"), {"name": "hats", "key_field": "sku", "file_format": "csv", "file": again}, headers=HTMX
    ).content.decode()
    assert "added to hats (1 row now)" in page and "1 key already exists in the table" in page


def test_a_preview_of_a_broken_file_says_why(client, db):
    client = _admin_client(client)
    broken = SimpleUploadedFile("h.json", b"[{]")
    response = client.post(
        reverse("table_import_preview"), {"name": "hats", "key_field": "sku", "file_format": "json", "file": broken}, headers=HTMX
    )
    assert response.status_code == 422 and "could not be read as JSON" in response.content.decode()


def test_only_administrators_preview_imports(client, db):
    client.force_login(make_user("alice", "operator"))
    upload = SimpleUploadedFile("h.csv", b"sku\nA1\n")
    response = client.post(reverse("table_import_preview"), {"name": "hats", "key_field": "sku", "file_format": "csv", "file": upload})
    assert response.status_code == 403
