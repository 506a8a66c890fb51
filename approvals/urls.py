from django.urls import path, re_path

from approvals import policy_views, views

urlpatterns = [
    path("audit/", views.history, name="audit_history"),
    path("profile/", views.profile, name="profile"),
    path("policies/", policy_views.policy_page, name="policies"),
    path("policies/grants/", policy_views.grant_create, name="grant_create"),
    path("policies/grants/<int:grant_id>/revoke", policy_views.grant_revoke, name="grant_revoke"),
    path("profile/tokens/<int:token_id>/revoke", views.token_revoke, name="token_revoke"),
    re_path(r"^audit/export\.(?P<file_format>csv|json)$", views.export, name="audit_export"),
]
