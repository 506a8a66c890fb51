"""The HTTP API (django-ninja). Session auth (with CSRF) for the browser, bearer tokens for scripts."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer, django_auth

from approvals.api import router as audit_router
from approvals.policy_api import router as policy_router
from approvals.tokens import token_authenticate
from core.errors import ServiceError
from execution.api import router as execution_router
from execution.batch_api import router as batch_router
from planning.api import router as planning_router
from tools.api import router as tools_router


class BearerToken(HttpBearer):
    def authenticate(self, request, token):
        # An unknown, expired or revoked token authenticates nobody: the API answers 401.
        user = token_authenticate(token)
        if user is not None:
            request.user = user
        return user


api = NinjaAPI(title="Countersign API", version="1", auth=[BearerToken(), django_auth], urls_namespace="api")
api.add_router("/", tools_router)
api.add_router("/", planning_router)
api.add_router("/", execution_router)
api.add_router("/", batch_router)
api.add_router("/", audit_router)
api.add_router("/", policy_router)


@api.exception_handler(ServiceError)
def service_error(request, error: ServiceError):
    return api.create_response(request, {"detail": error.message}, status=error.status)


@api.exception_handler(PermissionDenied)
def permission_denied(request, error):
    return api.create_response(request, {"detail": str(error) or "Permission denied."}, status=403)


@api.exception_handler(Http404)
def not_found(request, error):
    return api.create_response(request, {"detail": str(error) or "Not found."}, status=404)


@api.exception_handler(AuthenticationError)
def unauthenticated(request, error):
    return api.create_response(request, {"detail": "Authentication required: log in or send Authorization: Bearer <token>."}, status=401)


@api.exception_handler(ValidationError)
def invalid(request, error: ValidationError):
    return api.create_response(request, {"detail": error.errors}, status=422)


__all__ = ["api", "HttpError"]
