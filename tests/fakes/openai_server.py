"""An OpenAI-compatible HTTP server for tests: the real openai SDK talks to it over HTTP.

Tests script the answers (`server.reply(content)`, `server.fail(status)`) and read back what the SDK sent
(`server.requests`). Runs in a thread of the test process, so a Celery worker subprocess can reach it too.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self):
        self.requests: list[dict] = []
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
            self._script.clear()

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
                with fake._lock:
                    fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                step = fake._next()
                if "hang" in step:
                    time.sleep(step["hang"])
                    step = {"status": 500, "message": "hung"}
                if "status" in step:
                    self._send(step["status"], {"error": {"message": step["message"], "type": "fake_error"}})
                    return
                prompt_tokens, completion_tokens = step["usage"]
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
