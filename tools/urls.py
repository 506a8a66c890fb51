from django.urls import path

from tools import views

urlpatterns = [
    path("tools/", views.tools_page, name="tools"),
    path("tools/sources/add", views.source_add, name="tool_source_add"),
    path("tools/sources/<slug:name>/sync", views.source_sync, name="tool_source_sync"),
    path("tools/<str:tool_name>/override", views.tool_override, name="tool_override"),
]
