from django.contrib import admin

from webapp.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "hint", "created_at", "last_used_at")
    search_fields = ("name", "user__username", "hint")
    # The hash is useless to read and must never be edited into a known value.
    readonly_fields = ("token_hash", "hint", "created_at", "last_used_at")
