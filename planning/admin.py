from django.contrib import admin

from .models import Goal, Plan, PlanRevision, Playbook, Step, StepAttempt


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    fields = ["key", "title", "tool", "risk", "status"]
    readonly_fields = ["risk"]


@admin.register(Goal)
class GoalAdmin(admin.ModelAdmin):
    list_display = ["id", "text", "mode", "requester", "created_at"]


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["id", "goal", "status", "revision", "planner", "model", "updated_at"]
    list_filter = ["status", "planner"]
    inlines = [StepInline]


@admin.register(PlanRevision)
class PlanRevisionAdmin(admin.ModelAdmin):
    list_display = ["plan", "number", "author", "planner", "reason", "created_at"]

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["plan", "key", "title", "tool", "risk", "status"]
    list_filter = ["status", "risk"]


@admin.register(StepAttempt)
class StepAttemptAdmin(admin.ModelAdmin):
    list_display = ["step", "number", "idempotency_key", "status", "started_at"]


@admin.register(Playbook)
class PlaybookAdmin(admin.ModelAdmin):
    list_display = ["name", "source", "created_by", "created_at"]
