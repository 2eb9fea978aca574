"""Forms of the set-up pages. Each names the org it changes (a hidden field the view checks against the person's
orgs); what a target may be is the service's to say (grading/management/service_targets.py and selectors.py), and
its refusals land on the field concerned."""

from django import forms

from grading.management.selectors import POSITION_MAX, REASONS
from grading.models import ItemKind

MINUTES, HOURS = "minutes", "hours"
EARLIER, LATER = "earlier", "later"


class TargetForm(forms.Form):
    """A new target: the items it picks (blank: any), within how long people decide them, and where it goes (ahead
    of a target, or blank: after the last). The application is one of the org's, checked by the view."""

    org = forms.IntegerField(widget=forms.HiddenInput)
    kind = forms.ChoiceField(choices=[("", "any kind"), *ItemKind.choices], required=False)
    application = forms.CharField(required=False, max_length=200)
    reason = forms.ChoiceField(choices=[("", "any reason"), *((reason, reason) for reason in REASONS)], required=False)
    within = forms.IntegerField(label="within")
    unit = forms.ChoiceField(choices=[(MINUTES, "minutes"), (HOURS, "hours")])
    ahead_of = forms.IntegerField(required=False, min_value=1, max_value=POSITION_MAX, label="place")


class TargetAtForm(forms.Form):
    """Names one of the org's targets (or rules) by its position (the page's own buttons fill it)."""

    org = forms.IntegerField()
    position = forms.IntegerField(min_value=1, max_value=POSITION_MAX)


class TargetMoveForm(TargetAtForm):
    direction = forms.ChoiceField(choices=[(EARLIER, EARLIER), (LATER, LATER)])


class TargetChangeForm(TargetAtForm):
    """A target's new duration; what it picks stays (to pick other items, add a target and remove this one)."""

    within = forms.IntegerField(label="within")
    unit = forms.ChoiceField(choices=[(MINUTES, "minutes"), (HOURS, "hours")])


class PoolForm(forms.Form):
    """A pool's name and members (the org's queue people by id, ticked on the page): a new name creates it, a known
    one sets its members to exactly those ticked."""

    org = forms.IntegerField(widget=forms.HiddenInput)
    name = forms.CharField(required=False, max_length=1_000, strip=False)
    members = forms.TypedMultipleChoiceField(coerce=int, required=False, choices=[])

    def __init__(self, *args, people: list[tuple[int, str]] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["members"].choices = people


class PoolRemoveForm(forms.Form):
    org = forms.IntegerField()
    name = forms.CharField(max_length=1_000, strip=False)


class PoolRenameForm(PoolRemoveForm):
    """A pool (by its name, from the page) and the name it takes."""

    to = forms.CharField(required=False, max_length=1_000, strip=False, label="new name")


class RuleForm(forms.Form):
    """An assignment rule, added after the last or in place of the rule at `replaces`: the items it picks (blank:
    any), who may claim them first (a person: `person:ID`, or a pool: `pool:NAME`, from the page's list of the org's),
    and for how many hours once they wait (blank: as long as they wait). The application is one of the org's, checked
    by the view."""

    org = forms.IntegerField(widget=forms.HiddenInput)
    kind = forms.ChoiceField(choices=[("", "any kind"), *ItemKind.choices], required=False)
    application = forms.CharField(required=False, max_length=200)
    reason = forms.ChoiceField(choices=[("", "any reason"), *((reason, reason) for reason in REASONS)], required=False)
    assignee = forms.CharField(max_length=1_000, label="to")
    hours = forms.IntegerField(required=False)
    replaces = forms.IntegerField(required=False, min_value=1, max_value=POSITION_MAX, label="place")


class EscalationForm(forms.Form):
    """Whom the org's escalation mails and how long before the due time it warns (the webhook is set from the shell:
    `manage.py escalation`). Unticked boxes are "no": the page always sends every setting."""

    org = forms.IntegerField(widget=forms.HiddenInput)
    warn_minutes = forms.IntegerField(label="warn")
    to_assignees = forms.BooleanField(required=False)
    to_leads = forms.BooleanField(required=False)


class OrgForm(forms.Form):
    org = forms.IntegerField()
