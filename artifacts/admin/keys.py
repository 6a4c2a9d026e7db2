"""API keys and their grants in the admin: grants are edited here; keys are created and revoked by commands or the
revoke action, and a revoked key stays revoked (the database refuses to un-revoke or delete it, migration 0011)."""

from django.contrib import admin

from artifacts import services
from artifacts.admin.display import identity_column
from artifacts.admin.guards import GuardedAdmin, GuardedAutocomplete
from artifacts.models import ApiKey, ApiKeyGrant


class ApiKeyGrantInline(GuardedAutocomplete, admin.TabularInline):
    model = ApiKeyGrant
    extra = 1
    autocomplete_fields = ["scope"]


@admin.register(ApiKey)
class ApiKeyAdmin(GuardedAdmin):
    list_display = [
        identity_column("name", "name"),
        identity_column("key_prefix", "key prefix"),
        "created_at",
        "revoked_at",
    ]
    search_fields = ["name", "key_prefix"]
    # The name is the key's identity (revisions record "api-key:<name>" as their author): shown, not edited.
    # Revocation is final and happens only through the action below or `manage.py revoke_api_key`: the form shows
    # revoked_at and never writes it (clearing it would make a revoked key work again).
    # A tuple: one sequence serves as fields and readonly_fields, which a list could not type as both.
    readonly_fields = ("name_shown", "key_prefix_shown", "created_at", "revoked_at")
    fields = readonly_fields
    name_shown = identity_column("name", "Name")
    key_prefix_shown = identity_column("key_prefix", "Key prefix")
    inlines = [ApiKeyGrantInline]
    actions = ["revoke_keys"]

    def has_add_permission(self, request):
        # A key's plaintext is shown once: create keys with `manage.py create_api_key`.
        return False

    def save_model(self, request, obj, form, change):
        if change:
            # The form edits only the grants (saved with the inlines): the key's own row is never written back, so
            # a key revoked while this form was open stays revoked.
            return
        super().save_model(request, obj, form, change)

    def has_delete_permission(self, request, obj=None):
        # A revoked key's row is what keeps it revoked: deleting it would let the same key be created again, active.
        # Django asks this for every object of a bulk delete too, so a selection holding one is refused whole.
        if obj is not None and obj.revoked_at is not None:
            return False
        return super().has_delete_permission(request, obj)

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_keys(self, request, queryset):
        for api_key in queryset:
            services.api_key_revoke(api_key=api_key)
