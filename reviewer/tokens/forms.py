from django import forms

# The lifetimes offered, in days; "" keeps the token until it is revoked.
EXPIRY_CHOICES = [("30", "30 days"), ("90", "90 days"), ("365", "a year"), ("", "no expiry")]


class TokenForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    name = forms.CharField(max_length=100, help_text="What uses the token, to recognise it by (e.g. ci, my-laptop).")
    expires = forms.ChoiceField(choices=EXPIRY_CHOICES, required=False, initial="90")
