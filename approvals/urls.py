from django.urls import path, re_path

from approvals import views

urlpatterns = [
    path("audit/", views.history, name="audit_history"),
    path("profile/", views.profile, name="profile"),
    path("profile/tokens/<int:token_id>/revoke", views.token_revoke, name="token_revoke"),
    re_path(r"^audit/export\.(?P<file_format>csv|json)$", views.export, name="audit_export"),
]
