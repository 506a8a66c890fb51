"""What a model family accepts, so the one LLM module sends only parameters the endpoint takes.

The table below is the starting point, chosen by the model's name (longest matching prefix, a provider
prefix such as "openai/" ignored). COUNTERSIGN_LLM_CAPABILITIES overrides it, either as JSON
(`{"temperature": false, "length_parameter": "max_completion_tokens", "structured": "json_object"}`) or as
a comma list of words (`no-temperature, max_completion_tokens, json_object`). What an endpoint refuses
at run time (an HTTP 400 naming a parameter) is learned for the rest of the process on top of both.
"""

import json
import threading
from dataclasses import dataclass, replace

from django.conf import settings

LENGTH_PARAMETERS = ("max_tokens", "max_completion_tokens")
# Structured output, from the strongest guarantee to none: each is the fallback of the one before.
STRUCTURED = ("json_schema", "json_object", "none")


class CapabilitiesInvalid(ValueError):
    """COUNTERSIGN_LLM_CAPABILITIES cannot be read; the message says how to write it."""


@dataclass(frozen=True)
class Capabilities:
    temperature: bool = True
    length_parameter: str = "max_tokens"
    structured: str = "json_schema"

    def weaker_structure(self) -> "Capabilities | None":
        index = STRUCTURED.index(self.structured)
        return replace(self, structured=STRUCTURED[index + 1]) if index + 1 < len(STRUCTURED) else None


REASONING = Capabilities(temperature=False, length_parameter="max_completion_tokens")
FAMILIES: dict[str, Capabilities] = {
    # Reasoning models refuse a non-default temperature and max_tokens (o-series, gpt-5 family).
    "o1": REASONING,
    "o1-mini": replace(REASONING, structured="none"),
    "o1-preview": replace(REASONING, structured="none"),
    "o3": REASONING,
    "o4": REASONING,
    "gpt-5": REASONING,
    "gpt-4o": Capabilities(),
    "gpt-4.1": Capabilities(),
    # Older chat models know JSON mode but not structured outputs.
    "gpt-4": Capabilities(structured="json_object"),
    "gpt-4-turbo": Capabilities(structured="json_object"),
    "gpt-3.5-turbo": Capabilities(structured="json_object"),
}

WORDS = {
    "temperature": {"temperature": True},
    "no-temperature": {"temperature": False},
    "max_tokens": {"length_parameter": "max_tokens"},
    "max_completion_tokens": {"length_parameter": "max_completion_tokens"},
    "json_schema": {"structured": "json_schema"},
    "json_object": {"structured": "json_object"},
    "none": {"structured": "none"},
    "text": {"structured": "none"},
}

_learned: dict[tuple[str, str], Capabilities] = {}
_lock = threading.Lock()


def family_of(model: str) -> Capabilities:
    name = model.rsplit("/", 1)[-1].lower()
    matches = [prefix for prefix in FAMILIES if name == prefix or name.startswith(prefix + "-")]
    return FAMILIES[max(matches, key=len)] if matches else Capabilities()


def parse_override(text: str) -> dict:
    """The fields COUNTERSIGN_LLM_CAPABILITIES sets, checked."""
    text = (text or "").strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as error:
            raise CapabilitiesInvalid(f"COUNTERSIGN_LLM_CAPABILITIES is not valid JSON: {error}") from None
    else:
        fields = {}
        for word in filter(None, (part.strip().lower() for part in text.split(","))):
            if word not in WORDS:
                raise CapabilitiesInvalid(f"COUNTERSIGN_LLM_CAPABILITIES: unknown word {word!r}; use {', '.join(WORDS)}.")
            fields.update(WORDS[word])
    return _checked(fields)


def _checked(fields: dict) -> dict:
    allowed = {"temperature": (True, False), "length_parameter": LENGTH_PARAMETERS, "structured": STRUCTURED}
    for name, value in fields.items():
        if name not in allowed or value not in allowed[name]:
            raise CapabilitiesInvalid(f"COUNTERSIGN_LLM_CAPABILITIES: {name}={value!r} is not one of the accepted settings.")
    return fields


def _endpoint(model: str) -> tuple[str, str]:
    return (settings.OPENAI_BASE_URL or "default", model)


def for_model(model: str) -> Capabilities:
    """What to send to this model: learned refusals first, then the override, then the family table."""
    with _lock:
        learned = _learned.get(_endpoint(model))
    if learned is not None:
        return learned
    return replace(family_of(model), **parse_override(getattr(settings, "COUNTERSIGN_LLM_CAPABILITIES", "")))


def remember(model: str, capabilities: Capabilities) -> None:
    with _lock:
        _learned[_endpoint(model)] = capabilities


def forget_learned() -> None:
    """Start again from the table (tests, or after the endpoint was upgraded)."""
    with _lock:
        _learned.clear()
