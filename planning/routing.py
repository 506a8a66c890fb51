from django.urls import path

from planning.consumers import BadgeConsumer, InboxConsumer, PlanConsumer

websocket_urlpatterns = [
    path("ws/plans/<int:plan_id>/", PlanConsumer.as_asgi()),
    path("ws/inbox/", InboxConsumer.as_asgi()),
    path("ws/badge/", BadgeConsumer.as_asgi()),
]
