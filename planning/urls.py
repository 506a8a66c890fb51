from django.urls import path

from planning import table_views, views

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("goals/", views.goal_create, name="goal_create"),
    path("plans/<int:plan_id>/", views.plan_detail, name="plan_detail"),
    path("plans/<int:plan_id>/retry/", views.plan_retry, name="plan_retry"),
    path("plans/<int:plan_id>/retry-goal/", views.plan_retry_goal, name="plan_retry_goal"),
    path("plans/<int:plan_id>/start-empty/", views.plan_start_empty, name="plan_start_empty"),
    path("plans/<int:plan_id>/decide/", views.plan_decide, name="plan_decide"),
    path("plans/<int:plan_id>/resubmit/", views.plan_resubmit, name="plan_resubmit"),
    path("plans/<int:plan_id>/dry-run/", views.code_refresh, name="code_refresh"),
    path("plans/<int:plan_id>/revisions/", views.plan_revisions, name="plan_revisions"),
    path("plans/<int:plan_id>/alternatives/", views.alternatives_request, name="alternatives_request"),
    path("goals/<int:goal_id>/choose/", views.alternative_choose, name="alternative_choose"),
    path("plans/<int:plan_id>/playbook/", views.playbook_save, name="playbook_save"),
    path("plans/<int:plan_id>/steps/new/", views.step_add, name="step_add"),
    path("plans/<int:plan_id>/steps/<str:key>/", views.step_view, name="step_view"),
    path("plans/<int:plan_id>/steps/<str:key>/edit/", views.step_edit, name="step_edit"),
    path("plans/<int:plan_id>/steps/<str:key>/delete/", views.step_delete, name="step_delete"),
    path("plans/<int:plan_id>/steps/<str:key>/decompose/", views.step_decompose, name="step_decompose"),
    path("plans/<int:plan_id>/steps/<str:key>/move/", views.step_move, name="step_move"),
    path("playbooks/", views.playbook_list, name="playbook_list"),
    path("tables/", table_views.tables, name="tables"),
    path("tables/import/", table_views.table_import, name="table_import"),
    path("tables/import/preview/", table_views.table_import_preview, name="table_import_preview"),
]
