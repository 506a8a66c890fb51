from django.contrib import admin

from .models import ApiToken, Approval, AuditEvent, StandingGrant, WebhookDelivery, WebhookEndpoint


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ["plan", "kind", "decision", "approver", "revision", "created_at", "voided_at"]
    list_filter = ["kind", "decision"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the trail is append-only, even for administrators."""

    list_display = ["seq", "created_at", "actor_name", "action", "plan_id", "step_key"]
    list_filter = ["action"]
    search_fields = ["actor_name", "action"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "created_at", "expires_at", "last_used_at", "revoked_at"]
    readonly_fields = ["digest"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "url", "body_format", "active", "created_at")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("event", "endpoint", "attempts", "status_code", "delivered_at", "failed_at", "created_at")
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]


@admin.register(StandingGrant)
class StandingGrantAdmin(admin.ModelAdmin):
    list_display = ("pk", "tool", "max_uses", "uses", "expires_at", "created_by", "revoked_at")
    readonly_fields = ("uses", "created_by", "revoked_at", "revoked_by")
