"""The one module that talks to the LLM (any OpenAI-compatible endpoint, through the openai SDK)."""

import time
from dataclasses import dataclass

import openai
from django.conf import settings


class LLMError(Exception):
    """The LLM could not be reached or answered unusably; the message is safe to show an operator."""


@dataclass
class Completion:
    content: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_ms: int


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


def chat(
    messages: list[dict], *, response_format: dict | None = None, max_tokens: int | None = None, temperature: float = 0.2
) -> Completion:
    if not is_configured():
        raise LLMError("No LLM is configured (set OPENAI_BASE_URL and/or OPENAI_API_KEY).")
    options = {"model": settings.COUNTERSIGN_PLANNER_MODEL, "messages": messages, "temperature": temperature}
    if response_format is not None:
        options["response_format"] = response_format
    if max_tokens is not None:
        options["max_tokens"] = max_tokens
    started = time.monotonic()
    try:
        response = client().chat.completions.create(**options)
    except openai.APITimeoutError as error:
        raise LLMError(f"The LLM did not answer within {settings.OPENAI_TIMEOUT_S:g} s.") from error
    except openai.APIConnectionError as error:
        raise LLMError(f"Could not reach the LLM at {settings.OPENAI_BASE_URL or 'the default endpoint'}.") from error
    except openai.APIStatusError as error:
        raise LLMError(f"The LLM answered HTTP {error.status_code}: {_short(error.message)}") from error
    except openai.OpenAIError as error:
        raise LLMError(f"The LLM call failed: {_short(str(error))}") from error
    latency_ms = int((time.monotonic() - started) * 1000)
    if not response.choices:
        raise LLMError("The LLM returned no choices.")
    usage = response.usage
    return Completion(
        content=response.choices[0].message.content or "",
        model=response.model or settings.COUNTERSIGN_PLANNER_MODEL,
        tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
        tokens_out=getattr(usage, "completion_tokens", 0) or 0,
        latency_ms=latency_ms,
    )


def generate_text(prompt: str, *, max_tokens: int = 400) -> str:
    return chat([{"role": "user", "content": prompt}], max_tokens=max_tokens).content


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
