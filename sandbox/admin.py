from django.contrib import admin

from .models import DataRow, DataTable


class DataRowInline(admin.TabularInline):
    model = DataRow
    extra = 0


@admin.register(DataTable)
class DataTableAdmin(admin.ModelAdmin):
    list_display = ["name", "key_field", "description"]
    inlines = [DataRowInline]
