import json

from django import forms

from core import llm
from planning.services import MAX_GOAL_CHARS

NO_LLM = "No LLM is configured on this server, so plans come from stored playbooks; code plans and the LLM planner are unavailable."


class GoalForm(forms.Form):
    # No maxlength in the page: the browser would cut a pasted goal silently; the server refuses it visibly.
    text = forms.CharField(
        label="Goal",
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "e.g. Check open ticket count against the SLA and notify the on-call engineer if breached"}
        ),
    )
    planner = forms.ChoiceField(label="Planner", required=False)
    mode = forms.ChoiceField(
        label="Plan as", required=False, choices=[("steps", "Steps (tool calls)"), ("code", "Code (sandboxed Python, needs an LLM)")]
    )
    alternatives = forms.TypedChoiceField(
        label="Drafts",
        required=False,
        coerce=int,
        empty_value=1,
        choices=[(1, "One plan"), (2, "2 alternatives"), (3, "3 alternatives"), (4, "4 alternatives")],
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        choices = [("", "Automatic (LLM when configured, else playbook)"), ("playbook", "Playbook (offline)")]
        if llm.is_configured():
            choices.insert(1, ("llm", "LLM"))
        else:
            # Only what can work is offered; the reason is said once, beside the choices.
            choices[0] = ("", "Automatic (playbook)")
            self.fields["mode"].choices = [("steps", "Steps (tool calls)")]
            self.unavailable = NO_LLM
        self.fields["planner"].choices = choices

    unavailable = ""

    def clean_text(self):
        text = self.cleaned_data["text"].strip()
        if len(text) > MAX_GOAL_CHARS:
            raise forms.ValidationError(
                f"This goal is {len(text):,} characters; a goal can be at most {MAX_GOAL_CHARS:,}. Shorten it: nothing was cut or submitted."
            )
        return text


class RetryForm(forms.Form):
    planner = forms.ChoiceField(required=False, choices=[("", "Same as before"), ("llm", "LLM"), ("playbook", "Playbook")])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not llm.is_configured():
            self.fields["planner"].choices = [("", "Same as before"), ("playbook", "Playbook")]
            self.unavailable = NO_LLM

    unavailable = ""


class PlaybookForm(forms.Form):
    name = forms.CharField(max_length=200)


class StepForm(forms.Form):
    """One step's editable fields. `depends_on` choices are the plan's other step keys."""

    revision = forms.IntegerField(widget=forms.HiddenInput)
    title = forms.CharField(max_length=200)
    description = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    tool = forms.ChoiceField()
    args = forms.CharField(
        label="Arguments (JSON)", required=False, widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "mono"})
    )
    depends_on = forms.MultipleChoiceField(label="Depends on", required=False, widget=forms.CheckboxSelectMultiple)
    condition = forms.CharField(
        label="Runs only if",
        required=False,
        max_length=500,
        widget=forms.TextInput(attrs={"class": "mono", "placeholder": "e.g. steps.s1.output > steps.s2.output"}),
    )
    success_criteria = forms.CharField(label="Success when", required=False, max_length=1000)

    def __init__(self, *args, tools: list, other_keys: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tool"].choices = tool_choices(tools)
        self.fields["depends_on"].choices = [(key, key) for key in other_keys]

    def clean_args(self):
        text = self.cleaned_data["args"].strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not valid JSON: {error.msg} (line {error.lineno}, column {error.colno}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Arguments must be a JSON object, e.g. {"queue": "support"}.')
        return value

    def changes(self) -> dict:
        return {
            name: self.cleaned_data[name]
            for name in ("title", "description", "tool", "args", "depends_on", "condition", "success_criteria")
        }


def tool_choices(tools: list) -> list:
    """The tool picker: built-in tools first, then one group per tool source, each labelled with its risk."""
    groups: dict[str, list] = {}
    for tool in tools:
        groups.setdefault(tool.source, []).append((tool.name, f"{tool.name} ({tool.risk.value.upper()})"))
    built_in = [("Built-in", groups.pop(""))] if "" in groups else []
    return built_in + [(f"Source: {source}", choices) for source, choices in sorted(groups.items())]


class DecisionForm(forms.Form):
    revision = forms.IntegerField(widget=forms.HiddenInput)
    content_hash = forms.CharField(max_length=64, widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=[("approved", "Approve"), ("rejected", "Reject"), ("changes_requested", "Request changes")])
    comment = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))


class CodeStepForm(forms.Form):
    """The code of a code plan, edited as code (not as JSON)."""

    revision = forms.IntegerField(widget=forms.HiddenInput)
    code = forms.CharField(max_length=50_000, widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false", "class": "mono"}))
    tables = forms.CharField(label="Tables (comma-separated)", max_length=500)
    user_request = forms.CharField(label="User request", max_length=4000, required=False)

    def clean_tables(self):
        names = [name.strip() for name in self.cleaned_data["tables"].split(",") if name.strip()]
        if not names:
            raise forms.ValidationError("Name at least one table.")
        return names

    def changes(self) -> dict:
        data = self.cleaned_data
        return {"args": {"code": data["code"].replace("\r\n", "\n"), "tables": data["tables"], "user_request": data["user_request"]}}


class ImportForm(forms.Form):
    # An existing table's name adds to (or, with "replace", replaces) its rows; a new name creates the table.
    name = forms.SlugField(label="Table", max_length=50, widget=forms.TextInput(attrs={"list": "existing-tables"}))
    key_field = forms.CharField(label="Key field", max_length=50, help_text="The field that identifies a row, e.g. item_id")
    file_format = forms.ChoiceField(label="Format", choices=[("csv", "CSV with a header line"), ("json", "JSON list of objects")])
    file = forms.FileField()
    replace = forms.BooleanField(label="Replace all existing rows", required=False)
