"""The tool catalogue API."""

from typing import Any

from django.core.exceptions import PermissionDenied
from ninja import Router, Schema

from core.roles import user_can
from tools.registry import registry

router = Router()


class Error(Schema):
    detail: Any


class ToolOut(Schema):
    name: str
    description: str
    risk: str
    idempotent: bool
    timeout_s: float
    args_schema: dict[str, Any]


@router.get("/tools", response={200: list[ToolOut], 403: Error}, summary="The tool catalogue with risk tiers and argument schemas")
def list_tools(request):
    if not user_can(request.user, "view"):
        raise PermissionDenied("You may not view tools.")
    return [tool.catalogue_entry() for tool in registry.all()]
