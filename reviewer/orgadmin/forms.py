"""Forms of the org admin's pages. Each names the org it changes (a hidden field the view checks against the
admin's orgs); what a change may be is the services' to say, and their refusals land on the field concerned."""

from django import forms

from grading.dashboard.dimensions import DimensionsRefused, dimensions_checked
from grading.delivery.signing import OVERLAP_DEFAULT, OVERLAP_MAX
from reviewer.models import Role
from reviewer.orgadmin.members import APPLICATION_NAME_MAX
from reviewer.orgadmin.retention import KINDS, RETENTION_DAYS_MAX

WHOLE, PART = "whole", "part"


class ApplicationNames(forms.MultipleChoiceField):
    """Application names chosen from a select of the org's known applications (`applications_known`). Which names
    are known is the service's to say (`applications_checked`, which lists them in its refusal), not the choices'."""

    def valid_value(self, value: str) -> bool:
        return True


class ReachForm(forms.Form):
    """What a membership covers: the whole org, or some applications' conversations and perhaps the drafts."""

    reach = forms.ChoiceField(choices=[(WHOLE, "the whole org"), (PART, "only part of it")])
    applications = ApplicationNames(required=False, help_text="The org's applications: choose one or more.")
    drafts = forms.BooleanField(required=False, label="drafts too")

    def clean_applications(self) -> list[str]:
        names = [name.strip() for name in self.cleaned_data["applications"]]
        if "" in names:
            raise forms.ValidationError("An application name is empty.")
        too_long = [name for name in names if len(name) > APPLICATION_NAME_MAX]
        if too_long:
            raise forms.ValidationError(f"Application names are at most {APPLICATION_NAME_MAX} characters.")
        return sorted(set(names))

    def reach_setting(self) -> dict:
        """The services' `applications` (None: the whole org) and `drafts`."""
        if self.cleaned_data["reach"] == WHOLE:
            return {"applications": None, "drafts": True}
        return {"applications": self.cleaned_data["applications"], "drafts": self.cleaned_data["drafts"]}


class MemberAddForm(ReachForm):
    org = forms.IntegerField(widget=forms.HiddenInput)
    person = forms.CharField(max_length=254, label="a member's username, or an e-mail address to invite")
    role = forms.ChoiceField(choices=Role.choices)


class ApiKeyForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    name = forms.CharField(max_length=100, help_text="What uses the key, to recognise it by (e.g. support-pipeline).")


class SecretRotateForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    overlap_hours = forms.IntegerField(
        min_value=0,
        max_value=int(OVERLAP_MAX.total_seconds() // 3600),
        initial=int(OVERLAP_DEFAULT.total_seconds() // 3600),
        label="hours the old secret keeps signing",
    )


class RetentionForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    kind = forms.ChoiceField(choices=[(kind.value, kind.label) for kind in KINDS])
    days = forms.IntegerField(
        required=False, min_value=1, max_value=RETENTION_DAYS_MAX, help_text="Empty: keep forever."
    )


class DimensionsForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    dimensions = forms.CharField(
        required=False, max_length=1_000, help_text="Metadata names, comma-separated (release, environment)."
    )

    def clean_dimensions(self) -> list[str]:
        try:
            return dimensions_checked(self.cleaned_data["dimensions"].split(","))
        except DimensionsRefused as refused:
            raise forms.ValidationError(str(refused)) from None
