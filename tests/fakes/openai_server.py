"""An OpenAI-compatible HTTP server for tests: the real openai SDK talks to it over HTTP.

Tests script the answers (`server.reply(content)`, `server.fail(status)`) and read back what the SDK sent
(`server.requests`) and the usage it reported (`server.served`). Runs in a thread of the test process, so
a Celery worker subprocess can reach it too.

`server.behave(*modes)` makes it refuse requests as real endpoints do, with their HTTP 400 bodies:
- "reasoning": a temperature other than the default, and `max_tokens` (o-series, gpt-5 family);
- "strict": a json_schema that is not strict, or that breaks strict mode's rules (checked here from
  OpenAI's documentation, independently of the app's schema builder);
- "json_object": any json_schema (JSON mode only; it also wants the word JSON in the messages);
- "text": any response_format at all.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self):
        self.requests: list[dict] = []
        self.served: list[dict] = []
        self.modes: set[str] = set()
        self._script: list[dict] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.served.clear()
            self.modes.clear()
            self._script.clear()

    def behave(self, *modes: str) -> "FakeOpenAI":
        unknown = set(modes) - set(REFUSALS)
        if unknown:
            raise ValueError(f"unknown fake modes {unknown}")
        self.modes = set(modes)
        return self

    def refusals(self) -> list[dict]:
        """The requests it answered with a 400 because of its modes."""
        return [request for request in self.requests if request.get("refused")]

    def answered(self) -> list[dict]:
        return [request for request in self.requests if not request.get("refused")]

    def usage_total(self) -> tuple[int, int]:
        return sum(u["prompt_tokens"] for u in self.served), sum(u["completion_tokens"] for u in self.served)

    def _refusal(self, body: dict) -> dict | None:
        for mode in sorted(self.modes):
            refusal = REFUSALS[mode](body)
            if refusal:
                return refusal
        return None

    def reply(self, content: str, *, prompt_tokens: int = 120, completion_tokens: int = 80, model: str | None = None) -> None:
        with self._lock:
            self._script.append({"content": content, "usage": (prompt_tokens, completion_tokens), "model": model})

    def fail(self, status: int, message: str = "scripted failure") -> None:
        with self._lock:
            self._script.append({"status": status, "message": message})

    def hang(self, seconds: float) -> None:
        with self._lock:
            self._script.append({"hang": seconds})

    def _next(self) -> dict:
        with self._lock:
            return self._script.pop(0) if self._script else {"status": 500, "message": "no scripted answer left"}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict):
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "tests"}]})
                else:
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                request = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
                with fake._lock:
                    fake.requests.append(request)
                refusal = fake._refusal(body)
                if refusal:
                    request["refused"] = refusal
                    self._send(400, {"error": {"type": "invalid_request_error", "code": None, **refusal}})
                    return
                step = fake._next()
                if "hang" in step:
                    time.sleep(step["hang"])
                    step = {"status": 500, "message": "hung"}
                if "status" in step:
                    self._send(step["status"], {"error": {"message": step["message"], "type": "fake_error"}})
                    return
                prompt_tokens, completion_tokens = step["usage"]
                with fake._lock:
                    fake.served.append({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-fake-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": step["model"] or body.get("model", "fake-model"),
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": step["content"]}}],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    },
                )

        return Handler


# ---- how real endpoints refuse -----------------------------------------------------------------------


def _reasoning_refusal(body: dict) -> dict | None:
    if "temperature" in body and body["temperature"] != 1:
        return {
            "message": f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. Only the default (1) value is supported.",
            "param": "temperature",
            "code": "unsupported_value",
        }
    if "max_tokens" in body:
        return {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    return None


def _strict_refusal(body: dict) -> dict | None:
    response_format = body.get("response_format") or {}
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    if spec.get("strict") is not True:
        return {"message": "This endpoint only accepts strict schemas: set 'strict': true.", "param": "response_format"}
    problems = strict_schema_problems(spec.get("schema"))
    if problems:
        return {"message": f"Invalid schema for response_format '{spec.get('name')}': {problems[0]}", "param": "response_format"}
    return None


def _json_object_refusal(body: dict) -> dict | None:
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return {
            "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
            "param": "response_format",
        }
    if response_format.get("type") == "json_object" and "json" not in json.dumps(body.get("messages", [])).lower():
        return {
            "message": "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
            "param": "messages",
        }
    return None


def _text_refusal(body: dict) -> dict | None:
    if body.get("response_format"):
        return {"message": "response_format is not supported by this server.", "param": "response_format"}
    return None


REFUSALS = {"reasoning": _reasoning_refusal, "strict": _strict_refusal, "json_object": _json_object_refusal, "text": _text_refusal}

# Strict mode's supported keywords (OpenAI "Structured Outputs", supported schemas), at their most
# conservative: no default, format, pattern, length or range keywords, no oneOf/allOf/not.
STRICT_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "title",
}
STRICT_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
MAX_NESTING = 10


def strict_schema_problems(schema) -> list[str]:
    """Why strict mode would refuse `schema` (empty when it accepts it)."""
    if not isinstance(schema, dict):
        return ["the schema must be a JSON object"]
    if schema.get("type") != "object" or "anyOf" in schema:
        return ["the root must be an object, not anyOf"]
    defs = schema.get("$defs", {})
    problems: list[str] = []

    def check(node, where: str, depth: int) -> None:
        if not isinstance(node, dict):
            problems.append(f"{where}: not a schema")
            return
        if depth > MAX_NESTING:
            problems.append(f"{where}: nested more than {MAX_NESTING} levels")
            return
        for keyword in set(node) - STRICT_KEYWORDS:
            problems.append(f"{where}: '{keyword}' is not permitted")
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/$defs/")
            if not node["$ref"].startswith("#/$defs/") or name not in defs:
                problems.append(f"{where}: reference {node['$ref']} does not resolve")
            return
        if "anyOf" in node:
            for index, branch in enumerate(node["anyOf"]):
                check(branch, f"{where}.anyOf[{index}]", depth + 1)
            return
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if "enum" not in node and "const" not in node and not (kinds and set(kinds) <= STRICT_TYPES):
            problems.append(f"{where}: every schema needs a type")
        if "object" in kinds:
            properties = node.get("properties", {})
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: 'additionalProperties' is required to be supplied and to be false")
            if sorted(node.get("required", [])) != sorted(properties):
                problems.append(f"{where}: 'required' is required to be supplied and to be an array including every key in properties")
            for name, child in properties.items():
                check(child, f"{where}.{name}", depth + 1)
        if "array" in kinds:
            check(node.get("items"), f"{where}.items", depth + 1)

    check(schema, "root", 1)
    for name, definition in defs.items():
        check(definition, f"$defs.{name}", 1)
    return problems
