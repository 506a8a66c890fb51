from django import forms

from core.risk import Risk


class SourceForm(forms.Form):
    name = forms.SlugField(max_length=40, help_text="Its tools are named NAME.TOOL")
    stdio = forms.CharField(label="stdio command", required=False, max_length=4000, widget=forms.TextInput(attrs={"class": "mono"}))
    url = forms.CharField(label="or Streamable HTTP URL", required=False, max_length=2000)
    headers = forms.CharField(
        label="HTTP headers (one NAME=VALUE a line; stored as secrets, never shown again)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono", "autocomplete": "off"}),
    )
    trusted = forms.BooleanField(required=False, help_text="Let the server's annotations set risk tiers")

    def header_lines(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["headers"].splitlines() if line.strip()]


class OverrideForm(forms.Form):
    risk = forms.ChoiceField(choices=[("", "keep")] + list(Risk.choices), required=False)
    idempotent = forms.ChoiceField(choices=[("", "keep"), ("true", "idempotent"), ("false", "not idempotent")], required=False)
    reason = forms.CharField(max_length=500)

    def values(self) -> dict:
        idempotent = self.cleaned_data["idempotent"]
        return {
            "risk": self.cleaned_data["risk"] or None,
            "idempotent": None if idempotent == "" else idempotent == "true",
            "reason": self.cleaned_data["reason"],
        }
