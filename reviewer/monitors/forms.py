"""The monitor form: what the page sends, typed. What a monitor may be is the service's to say
(grading/monitors/services.py), and its refusals land on the field concerned. Rates are typed as percentages (90
for 90%) and stored as fractions; spend in tokens and overdue in items as they are."""

from django import forms

from grading.models import Direction, ItemKind, MonitorFigure
from grading.monitors.notices import RATES

LEVELS = ("warning_level", "alert_level", "margin")


class MonitorForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    name = forms.CharField(max_length=100)
    figure = forms.ChoiceField(choices=MonitorFigure.choices)
    kind = forms.ChoiceField(choices=ItemKind.choices, initial=ItemKind.CONVERSATION)
    check_key = forms.CharField(required=False, max_length=32, label="check")
    window_hours = forms.IntegerField(label="window (hours)", initial=24)
    application = forms.CharField(required=False, max_length=100)
    metadata_name = forms.CharField(required=False, max_length=64, label="metadata name")
    metadata_value = forms.CharField(required=False, max_length=200, label="metadata value")
    min_n = forms.IntegerField(label="at least (items)", initial=20)
    direction = forms.ChoiceField(
        choices=[("", "as the figure reads (pass rates: below; errors, spend: above)"), *Direction.choices],
        required=False,
    )
    warning_level = forms.FloatField(label="warning level")
    alert_level = forms.FloatField(label="alert level")
    margin = forms.FloatField(required=False, initial=0, label="margin")
    mail_to = forms.CharField(required=False, max_length=2_000, label="mail to (addresses, comma-separated)")
    webhook_url = forms.CharField(required=False, max_length=1_000, label="signed webhook URL")
    chat_url = forms.CharField(required=False, max_length=1_000, label="chat webhook URL (Slack-compatible)")

    def settings(self) -> dict:
        """The cleaned form as the service takes it (rates as fractions)."""
        given = {name: value for name, value in self.cleaned_data.items() if name != "org"}
        given["margin"] = given["margin"] or 0.0
        if given["figure"] in RATES:
            for name in LEVELS:
                given[name] = given[name] / 100
        return given


def shown_settings(settings: dict) -> dict:
    """A monitor's settings as the form shows them (rates as percentages, addresses comma-separated)."""
    shown = dict(settings)
    if shown["figure"] in RATES:
        for name in LEVELS:
            shown[name] = round(shown[name] * 100, 6)
    shown["mail_to"] = ", ".join(shown["mail_to"])
    return shown


class MonitorRemoveForm(forms.Form):
    """The page's remove button names the monitor it removes: a bare POST removes nothing."""

    monitor = forms.IntegerField()


class PageForm(forms.Form):
    """Which page of a list is shown: the monitors, or the items behind a figure (1 when not given)."""

    page = forms.IntegerField(min_value=1, max_value=100_000, required=False)
