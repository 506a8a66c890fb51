from django import forms

from planning import llm
from planning.services import MAX_GOAL_CHARS


class GoalForm(forms.Form):
    text = forms.CharField(
        label="Goal",
        max_length=MAX_GOAL_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "e.g. Check open ticket count against the SLA and notify the on-call engineer if breached"}
        ),
    )
    planner = forms.ChoiceField(label="Planner", required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        choices = [("", "Automatic (LLM when configured, else playbook)"), ("playbook", "Playbook (offline)")]
        if llm.is_configured():
            choices.insert(1, ("llm", "LLM"))
        self.fields["planner"].choices = choices


class RetryForm(forms.Form):
    planner = forms.ChoiceField(required=False, choices=[("", "Same as before"), ("llm", "LLM"), ("playbook", "Playbook")])


class PlaybookForm(forms.Form):
    name = forms.CharField(max_length=200)
