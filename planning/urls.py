from django.urls import path

from planning import views

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("goals/", views.goal_create, name="goal_create"),
    path("plans/<int:plan_id>/", views.plan_detail, name="plan_detail"),
    path("plans/<int:plan_id>/retry/", views.plan_retry, name="plan_retry"),
    path("plans/<int:plan_id>/playbook/", views.playbook_save, name="playbook_save"),
    path("playbooks/", views.playbook_list, name="playbook_list"),
]
