from django.urls import path

from planning.consumers import PlanConsumer

websocket_urlpatterns = [
    path("ws/plans/<int:plan_id>/", PlanConsumer.as_asgi()),
]
