"""General tools: fetch a page from an allowed host (MEDIUM), send email (HIGH), ask the LLM (LOW)."""

import urllib.error
import urllib.request
from typing import Annotated
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail
from pydantic import EmailStr, Field

from core import llm
from core.risk import Risk

from .registry import ToolError, tool


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect could leave the allowlist; the plan must name the final URL instead.
    def redirect_request(self, *args, **kwargs):
        return None


@tool(risk=Risk.MEDIUM, idempotent=True, timeout_s=30)
def http_get(url: Annotated[str, Field(min_length=1, max_length=2000, description="http(s) URL on an allowed host")]) -> dict:
    """Fetch a URL with GET. Only hosts listed in COUNTERSIGN_HTTP_ALLOWLIST; size and time are capped."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ToolError("Only absolute http:// or https:// URLs can be fetched.")
    if parts.hostname.lower() not in {host.lower() for host in settings.COUNTERSIGN_HTTP_ALLOWLIST}:
        raise ToolError(f"Host {parts.hostname!r} is not in COUNTERSIGN_HTTP_ALLOWLIST.")
    opener = urllib.request.build_opener(_NoRedirect)
    limit = settings.COUNTERSIGN_HTTP_MAX_BYTES
    try:
        with opener.open(url, timeout=settings.COUNTERSIGN_HTTP_TIMEOUT_S) as response:
            body = response.read(limit + 1)
            status, content_type = response.status, response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        raise ToolError(f"{url} answered HTTP {error.code}.") from error
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise ToolError(f"Could not fetch {url}: {error}") from error
    if len(body) > limit:
        raise ToolError(f"{url} returned more than {limit} bytes.")
    return {"status": status, "content_type": content_type, "text": body.decode("utf-8", errors="replace")}


@tool(risk=Risk.HIGH, idempotent=False, timeout_s=20, trusted_output=True)  # returns only what it was given
def send_email(
    to: EmailStr,
    subject: Annotated[str, Field(min_length=1, max_length=200)],
    body: Annotated[str, Field(min_length=1, max_length=20_000)],
) -> dict:
    """Send an email to one recipient."""
    send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to])
    return {"sent_to": to, "subject": subject}


@tool(risk=Risk.LOW, idempotent=True, timeout_s=60)
def llm_generate(
    prompt: Annotated[str, Field(min_length=1, max_length=20_000)],
    max_tokens: Annotated[int, Field(ge=1, le=4000)] = 400,
) -> str:
    """Ask the LLM to write text (a synthesis or a summary of earlier outputs)."""
    if not llm.is_configured():
        raise ToolError("No LLM is configured: set OPENAI_BASE_URL and/or OPENAI_API_KEY to use llm_generate.")
    try:
        return llm.generate_text(prompt, max_tokens=max_tokens, purpose="llm_generate")
    except llm.LLMError as error:
        raise ToolError(str(error)) from error
