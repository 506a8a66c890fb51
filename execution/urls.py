from django.urls import path

from execution import batch_views, views

urlpatterns = [
    path("plans/<int:plan_id>/run/", views.plan_run, name="plan_run"),
    path("plans/<int:plan_id>/cancel/", views.plan_cancel, name="plan_cancel"),
    path("plans/<int:plan_id>/steps/<str:key>/gate/", views.gate_decide, name="gate_decide"),
    path("plans/<int:plan_id>/steps/<str:key>/resolve/", views.step_resolve, name="step_resolve"),
    path("gates/decisions/", batch_views.gate_batch_decide, name="gate_batch_decide"),
    path("metrics/", views.metrics_page, name="metrics"),
]
