from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from project.api import api
from project.views import favicon, healthz, system_status


def _public(patterns):
    """The API authenticates each request itself (session or bearer token) and answers 401 in JSON,
    so the site-wide login redirect must not apply to it."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            _public(pattern.url_patterns)
        else:
            pattern.callback = login_not_required(pattern.callback)
    return patterns


api_patterns, app_name, namespace = api.urls

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("system-status/", system_status, name="system_status"),
    path("favicon.ico", favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include((_public(api_patterns), app_name), namespace=namespace)),
    path("", include("approvals.urls")),
    path("", include("planning.urls")),
    path("", include("execution.urls")),
    path("", include("tools.urls")),
]
