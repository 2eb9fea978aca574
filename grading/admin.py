"""The Django admin's view of criteria versions: history to read, never to rewrite. A published version is
read-only here as everywhere; an unpublished one is saved through `criteria_update`, so its rules and checks are
validated and its revision moves on as the editor's optimistic lock expects. New versions are made on the criteria
pages, which number them."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from grading.checks.rules import RulesInvalid, rules_validate
from grading.models import CriteriaVersion, ItemKind
from grading.reviews.versions import CriteriaImmutable, CriteriaInvalid, checks_validate, criteria_update


class CriteriaVersionForm(forms.ModelForm):
    class Meta:
        model = CriteriaVersion
        fields = ["rubric", "rules", "checks"]

    def clean(self) -> dict:
        cleaned = super().clean()
        if self.instance.published_at is not None:
            raise forms.ValidationError(f"{self.instance} is published and cannot change; create a new version.")
        if self.instance.kind == ItemKind.DRAFT and "rules" in cleaned:
            try:
                rules_validate(cleaned["rules"])
            except RulesInvalid as invalid:
                self.add_error("rules", [f"{path or 'rules'}: {' '.join(m)}" for path, m in invalid.errors.items()])
        if cleaned.get("checks"):  # left empty, the version's checks stay as they are
            try:
                checks_validate(cleaned["checks"], kind=self.instance.kind)
            except CriteriaInvalid as invalid:
                self.add_error("checks", [f"{path}: {' '.join(m)}" for path, m in invalid.errors.items()])
        return cleaned


@admin.register(CriteriaVersion)
class CriteriaVersionAdmin(admin.ModelAdmin):
    form = CriteriaVersionForm
    list_display = ["org", "kind", "number", "is_active", "published_at", "author", "revision"]
    list_filter = ["kind", "is_active"]
    readonly_fields = ["org", "kind", "number", "author", "based_on", "published_at", "is_active", "revision",
                       "updated_at", "updated_by"]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: CriteriaVersion | None = None) -> bool:
        if obj is not None and obj.published_at is not None:
            return False  # shown read-only: history is kept as it was published
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: CriteriaVersion | None = None) -> bool:
        return False  # reviews name their version; history is kept forever

    def save_model(self, request: HttpRequest, obj: CriteriaVersion, form: forms.ModelForm, change: bool) -> None:
        rules = form.cleaned_data["rules"] if obj.kind == ItemKind.DRAFT else None
        try:
            criteria_update(
                version=obj, actor=request.user, rubric=form.cleaned_data["rubric"], rules=rules,
                checks=form.cleaned_data.get("checks") or None,
            )  # fmt: skip
        except CriteriaImmutable as refused:  # published between the form's check and this save: nothing saved
            self.message_user(request, str(refused), level=messages.ERROR)
        obj.refresh_from_db()
