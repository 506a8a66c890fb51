"""The one module that talks to the LLM (any OpenAI-compatible endpoint, through the openai SDK).

It sends only what the model accepts (core.llm_capabilities), asks for the strongest structured output
the endpoint offers (strict json_schema, then json_object with the schema in the prompt, then plain
text), and reports every call's usage to the meter the caller opened with `metered(...)`. Floor 0: it
knows nothing of plans; planning and execution open a meter that records usage against a plan and
refuses calls once the plan's budget is spent.
"""

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Protocol

import openai
from django.conf import settings

from core import llm_capabilities
from core.llm_capabilities import Capabilities

log = logging.getLogger(__name__)

JSON_SCHEMA_STRICT = "json_schema_strict"
JSON_OBJECT = "json_object"
TEXT = "text"
OUTPUT_MODES = (JSON_SCHEMA_STRICT, JSON_OBJECT, TEXT)


class LLMError(Exception):
    """The LLM could not be reached or answered unusably; the message is safe to show an operator."""


class BudgetSpent(LLMError):
    """The meter refused the call: what it was for has spent its LLM budget. No request was sent."""


@dataclass
class Completion:
    content: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_ms: int
    output_mode: str = TEXT
    cost_usd: float = 0.0


@dataclass(frozen=True)
class JsonSchema:
    """A JSON schema the answer must follow; `name` is what the endpoint calls it."""

    name: str
    schema: dict


class Meter(Protocol):
    def check(self) -> None:
        """Raise BudgetSpent to stop the call before anything is sent."""

    def record(self, completion: Completion, purpose: str) -> None:
        """Store one answered call's usage."""


_meter: ContextVar[Meter | None] = ContextVar("countersign_llm_meter", default=None)


@contextmanager
def metered(meter: Meter) -> Iterator[Meter]:
    """Every LLM call inside the block is checked and recorded by `meter`, however deep it is made
    (a tool called by the worker does not know its plan; the worker opens the meter around it)."""
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


def is_configured() -> bool:
    return bool(settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY)


def client() -> openai.OpenAI:
    # Explicit timeout and retries: the SDK default timeout is ten minutes, far too long for a planner.
    return openai.OpenAI(
        api_key=settings.OPENAI_API_KEY or "not-needed",
        base_url=settings.OPENAI_BASE_URL or None,
        timeout=settings.OPENAI_TIMEOUT_S,
        max_retries=settings.OPENAI_MAX_RETRIES,
    )


def cost_usd(model: str, tokens_in: int, tokens_out: int) -> float:
    """Estimated from COUNTERSIGN_MODEL_PRICES (USD per million tokens in and out), matched by the
    longest model-name prefix, so "gpt-4.1-mini-2025-04-14" is priced as "gpt-4.1-mini"."""
    prices = settings.COUNTERSIGN_MODEL_PRICES
    name = model.rsplit("/", 1)[-1]
    matches = [known for known in prices if name == known or name.startswith(known + "-")]
    if not matches:
        return 0.0
    per_in, per_out = prices[max(matches, key=len)]
    return (tokens_in * per_in + tokens_out * per_out) / 1_000_000


@dataclass
class _Request:
    capabilities: Capabilities
    messages: list[dict]
    json_schema: JsonSchema | None
    max_tokens: int | None
    temperature: float | None
    refused: set[str] = field(default_factory=set)

    @property
    def output_mode(self) -> str:
        if self.json_schema is None or self.capabilities.structured == "none":
            return TEXT
        return JSON_SCHEMA_STRICT if self.capabilities.structured == "json_schema" else JSON_OBJECT

    def options(self, model: str) -> dict:
        options: dict = {"model": model, "messages": self.messages}
        if self.temperature is not None and self.capabilities.temperature:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            options[self.capabilities.length_parameter] = self._length_limit()
        if self.output_mode == JSON_SCHEMA_STRICT:
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": self.json_schema.name, "schema": self.json_schema.schema, "strict": True},
            }
        elif self.json_schema is not None:
            # Without a schema the endpoint enforces, the prompt carries it.
            options["messages"] = _with_schema_instruction(self.messages, self.json_schema)
            if self.output_mode == JSON_OBJECT:
                options["response_format"] = {"type": "json_object"}
        return options

    def _length_limit(self) -> int:
        # max_completion_tokens also counts a reasoning model's hidden reasoning, which would otherwise
        # use up a small answer's allowance before any visible text.
        if self.capabilities.length_parameter == "max_completion_tokens":
            return self.max_tokens + settings.COUNTERSIGN_LLM_REASONING_TOKENS
        return self.max_tokens

    def adapt(self, error: openai.APIStatusError) -> str | None:
        """After a 400 naming a parameter we sent: change the capabilities so it is not sent again, and
        say what changed. None when the refusal is about something else (or was adapted to already)."""
        named = _named_parameters(error)
        sent = self.options("")
        caps = self.capabilities
        if named & {"response_format", "json_schema", "json_object"} and "response_format" in sent:
            weaker = caps.weaker_structure()
            if weaker is None:
                return None
            self.capabilities = weaker
            return f"response_format {caps.structured} (fell back to {weaker.structured})"
        if "temperature" in named and "temperature" in sent and "temperature" not in self.refused:
            self.refused.add("temperature")
            self.capabilities = replace(caps, temperature=False)
            return "temperature (sent no temperature instead)"
        if caps.length_parameter in named and caps.length_parameter in sent and caps.length_parameter not in self.refused:
            self.refused.add(caps.length_parameter)
            other = next(limit for limit in llm_capabilities.LENGTH_PARAMETERS if limit != caps.length_parameter)
            self.capabilities = replace(caps, length_parameter=other)
            return f"{caps.length_parameter} (sent {other} instead)"
        return None


KNOWN_PARAMETERS = ("temperature", "max_completion_tokens", "max_tokens", "response_format", "json_schema", "json_object")


def _named_parameters(error: openai.APIStatusError) -> set[str]:
    """The parameters a refusal is about: the `param` the endpoint names, else those its message names."""
    if getattr(error, "param", None):
        return {str(error.param).split(".")[0]}
    text = _error_text(error).lower()
    return {name for name in KNOWN_PARAMETERS if name in text}


def _with_schema_instruction(messages: list[dict], schema: JsonSchema) -> list[dict]:
    instruction = (
        "Answer with one JSON object and nothing else (no prose, no Markdown fence). It must follow this JSON schema:\n"
        + json.dumps(schema.schema, separators=(",", ":"))
    )
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def chat(
    messages: list[dict],
    *,
    json_schema: JsonSchema | None = None,
    max_tokens: int | None = None,
    temperature: float | None = 0.2,
    purpose: str = "chat",
) -> Completion:
    if not is_configured():
        raise LLMError("No LLM is configured (set OPENAI_BASE_URL and/or OPENAI_API_KEY).")
    meter = _meter.get()
    if meter is not None:
        meter.check()
    model = settings.COUNTERSIGN_PLANNER_MODEL
    try:
        capabilities = llm_capabilities.for_model(model)
    except llm_capabilities.CapabilitiesInvalid as error:
        raise LLMError(str(error)) from None
    request = _Request(capabilities, messages, json_schema, max_tokens, temperature)
    started = time.monotonic()
    response = _send(model, request)
    latency_ms = int((time.monotonic() - started) * 1000)
    if not response.choices:
        raise LLMError("The LLM returned no choices.")
    usage = response.usage
    completion = Completion(
        content=response.choices[0].message.content or "",
        model=response.model or model,
        tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
        tokens_out=getattr(usage, "completion_tokens", 0) or 0,
        latency_ms=latency_ms,
        output_mode=request.output_mode,
    )
    completion.cost_usd = cost_usd(completion.model, completion.tokens_in, completion.tokens_out)
    if meter is not None:
        meter.record(completion, purpose)
    return completion


def _send(model: str, request: _Request):
    """One request, retried once per parameter the endpoint refuses; what was refused is remembered for
    the rest of the process, so later calls do not pay for the refusal again."""
    while True:
        try:
            return client().chat.completions.create(**request.options(model))
        except (openai.BadRequestError, openai.UnprocessableEntityError) as error:
            change = request.adapt(error)
            if change is None:
                raise LLMError(_status_text(error)) from error
            llm_capabilities.remember(model, request.capabilities)
            log.warning(
                "The LLM endpoint refused %s for model %s (%s); retrying, and from now on.", change, model, _short(_error_text(error))
            )
        except openai.APITimeoutError as error:
            raise LLMError(f"The LLM did not answer within {settings.OPENAI_TIMEOUT_S:g} s.") from error
        except openai.APIConnectionError as error:
            raise LLMError(f"Could not reach the LLM at {settings.OPENAI_BASE_URL or 'the default endpoint'}.") from error
        except openai.APIStatusError as error:
            raise LLMError(_status_text(error)) from error
        except openai.OpenAIError as error:
            raise LLMError(f"The LLM call failed: {_short(str(error))}") from error


def _error_text(error: openai.APIStatusError) -> str:
    """The endpoint's own message, without the SDK's "Error code: 400 - {...}" wrapping around it."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("message"), str) and inner["message"].strip():
            return inner["message"].strip()
        if isinstance(body.get("detail"), str):
            return body["detail"]
    if isinstance(body, str) and body.strip():
        return body.strip()
    return error.response.reason_phrase or "no message"


def _status_text(error: openai.APIStatusError) -> str:
    return f"The LLM answered HTTP {error.status_code}: {_short(_error_text(error))}"


def generate_text(prompt: str, *, max_tokens: int = 400, purpose: str = "text") -> str:
    return chat([{"role": "user", "content": prompt}], max_tokens=max_tokens, purpose=purpose).content


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
