from django.urls import path, re_path

from approvals import views

urlpatterns = [
    path("audit/", views.history, name="audit_history"),
    re_path(r"^audit/export\.(?P<file_format>csv|json)$", views.export, name="audit_export"),
]
