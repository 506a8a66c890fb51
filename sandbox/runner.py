"""run_code: LLM-written Python in a fresh process behind the operating-system wall (sandbox/wall.py);
what it would change comes back as effects (a diff), and nothing real changes here.

Two ways to the same wall: cold, a new `python -I -S child.py` per run (about 40 ms), and warm, a fork of a
template process that has already imported everything (one template per worker process, started on first
use and again whenever it is gone, also after a fork such as Celery's prefork pool). Either way every run
is a fresh process in its own namespaces; nothing survives a run."""

import ctypes.util
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import tinydb

from core.canonical import sha256_of
from sandbox import child, policy

CHILD = Path(__file__).with_name("child.py")
TINYDB_PATH = str(Path(tinydb.__file__).resolve().parent.parent)
PYSECCOMP_PATHS: list[str] = []
try:
    import pyseccomp

    _location = Path(pyseccomp.__file__).resolve()
    PYSECCOMP_PATHS = [str(_location.parent if _location.name == "pyseccomp.py" else _location.parent.parent)]
except ImportError:  # only other architectures need it; there the child refuses to run without a filter
    pass
PATHS = list(dict.fromkeys([TINYDB_PATH, *PYSECCOMP_PATHS]))


@functools.cache
def libraries() -> dict[str, str]:
    """Shared libraries the child may need (found once per process, on first use: find_library runs
    ldconfig, which is slow)."""
    found = {name: ctypes.util.find_library(name) for name in ("c", "seccomp")}
    return {name: path for name, path in found.items() if path}


@functools.cache
def unavailable_reason() -> str | None:
    """Why code plans cannot run here (the kernel refused a namespace, the filter, ...), or None. Checked
    once per process by running a trivial plan cold; run_code refuses to run anything while it says so."""
    payload = _payload("answer_text = 'walled'", {}, "", 10, None, None, False)
    outcome = _cold_run(payload, 10)
    try:
        raw = json.loads(outcome.out)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return f"the sandbox check ended without a result (exit status {outcome.exit})"
    isolation = raw.get("isolation") or {}
    if raw.get("status") == "ok" and raw.get("answer_text") == "walled" and isolation.get("seccomp") is True:
        return None
    return str(isolation.get("refused") or raw.get("error") or "the sandbox check failed")


DEFAULT_LIMITS = {"memory_mb": 256, "output_chars": 20_000, "recursion": 1000}
STDOUT_CAP_BYTES = child.RESULT_CAP_BYTES


@dataclass
class SandboxResult:
    status: str  # ok | error | timeout | policy_violation | limit_exceeded
    answer_text: str = ""
    code_status: str = ""
    stdout: str = ""
    error: str = ""
    limit: str = ""
    effects: list[dict] = field(default_factory=list)
    duration_ms: int = 0
    isolation: dict = field(default_factory=dict)

    @property
    def effects_hash(self) -> str:
        return sha256_of(self.effects)

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "answer_text": self.answer_text,
            "code_status": self.code_status,
            "stdout": self.stdout,
            "error": self.error,
            "limit": self.limit,
            "effects": self.effects,
            "effects_hash": self.effects_hash,
            "duration_ms": self.duration_ms,
            "isolation": self.isolation,
        }


def _settings_limits() -> dict:
    limits = dict(DEFAULT_LIMITS)
    try:
        from django.conf import settings

        limits["memory_mb"] = settings.COUNTERSIGN_SANDBOX_MEMORY_MB
        limits["output_chars"] = settings.COUNTERSIGN_SANDBOX_OUTPUT_CHARS
    except Exception:  # noqa: BLE001, S110 (usable without Django: the defaults apply)
        pass
    return limits


def run_code(
    code: str,
    *,
    tables: dict[str, list[dict]],
    user_request: str = "",
    timeout_s: float = 5,
    memory_mb: int | None = None,
    output_chars: int | None = None,
    unsafe_disable_language_policy: bool = False,
    warm: bool = True,
) -> SandboxResult:
    """Run `code` against copies of `tables`, in a fresh process behind the wall (sandbox/wall.py).
    `warm` forks it from this process's template when one is ready, else starts a cold child; both are
    the same wall. `unsafe_disable_language_policy` exists only so tests can show that the
    operating-system wall holds on its own; never set it for real plans."""
    started = time.monotonic()
    if not unsafe_disable_language_policy:
        violations = policy.check(code)
        if violations:
            return SandboxResult(status="policy_violation", error=" ".join(violations), duration_ms=_since(started))
    reason = unavailable_reason()
    if reason:
        return SandboxResult(status="error", error=f"Code plans are unavailable: {reason}", duration_ms=_since(started))
    payload = _payload(code, tables, user_request, timeout_s, memory_mb, output_chars, unsafe_disable_language_policy)
    outcome = template_run(payload, timeout_s) if warm else None
    if outcome is None:
        outcome = _cold_run(payload, timeout_s)
    return _result(outcome, tables, payload["limits"], timeout_s, _since(started))


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _payload(code, tables, user_request, timeout_s, memory_mb, output_chars, unsafe_disable_language_policy) -> dict:
    limits = _settings_limits()
    if memory_mb:
        limits["memory_mb"] = memory_mb
    if output_chars:
        limits["output_chars"] = output_chars
    limits["cpu_s"] = max(1, int(timeout_s) + 1)
    return {
        "code": code,
        "tables": tables,
        "user_request": user_request,
        "limits": limits,
        "timeout_s": timeout_s,
        "paths": PATHS,
        "libraries": libraries() if os.uname().machine != "x86_64" else {},
        "preload": policy.imported_modules(code) if not unsafe_disable_language_policy else [],
        "unsafe_disable_language_policy": unsafe_disable_language_policy,
    }


@dataclass
class Outcome:
    out: bytes
    timed_out: bool
    overflow: bool
    exit: int | None


def _spawn_child(*args: str) -> subprocess.Popen:
    """The child interpreter, cold run or template alike: isolated mode, an empty environment, no
    inherited descriptors but its pipes, its own session (so a kill reaches its whole group)."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={},
        cwd="/",
        start_new_session=True,
        close_fds=True,
    )


def _cold_run(payload: dict, timeout_s: float) -> Outcome:
    process = _spawn_child()
    try:
        process.stdin.write(json.dumps(payload, default=str).encode())
        process.stdin.close()
    except BrokenPipeError:
        pass
    # The child reads all of stdin before it runs anything, so the output is read only after the write.
    deadline = time.monotonic() + timeout_s + 0.5
    out, timed_out, overflow = child.read_capped(process.stdout.fileno(), deadline, STDOUT_CAP_BYTES)
    process.stdout.close()
    if not (timed_out or overflow):
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # it closed its pipe but runs on
            timed_out = True
    if timed_out or overflow:
        child.kill_group(process.pid)
    return Outcome(out, timed_out, overflow, process.wait())


def _result(outcome: Outcome, tables: dict, limits: dict, timeout_s: float, duration: int) -> SandboxResult:
    if outcome.timed_out:
        return SandboxResult(
            status="timeout", error=f"The code ran longer than {timeout_s:g} s and was stopped.", limit="time", duration_ms=duration
        )
    if outcome.overflow:
        return SandboxResult(
            status="limit_exceeded", limit="output", error="The code wrote more output than allowed.", duration_ms=duration
        )
    try:
        raw = json.loads(outcome.out)
    except (json.JSONDecodeError, UnicodeDecodeError):
        cause = _exit_cause(outcome.exit)
        return SandboxResult(status=cause[0], limit=cause[1], error=cause[2], duration_ms=duration)
    if not isinstance(raw, dict):
        return SandboxResult(status="error", error="The sandbox answered something that is not a result.", duration_ms=duration)
    result = SandboxResult(
        status=str(raw.get("status", "error")),
        answer_text=str(raw.get("answer_text", ""))[:5000],
        code_status=str(raw.get("code_status", ""))[:100],
        stdout=str(raw.get("stdout", ""))[: limits["output_chars"]],
        error=str(raw.get("error", ""))[:2000],
        limit=str(raw.get("limit", "")),
        duration_ms=duration,
        isolation=raw.get("isolation", {}) if isinstance(raw.get("isolation"), dict) else {},
    )
    if result.status in {"ok", "error"} and isinstance(raw.get("tables"), dict):
        result.effects = effects_between(tables, raw["tables"])
    return result


def _exit_cause(code: int | None) -> tuple[str, str, str]:
    if code is not None and code > 128:  # the run's parent reports a killed PID 1 as 128 + signal
        code = 128 - code
    if code == -signal.SIGXCPU or code == -signal.SIGKILL:
        return "limit_exceeded", "cpu", "The code used more CPU time than allowed."
    if code == -signal.SIGSEGV:
        return "error", "", "The code crashed the interpreter (segmentation fault)."
    return "error", "", f"The sandbox ended without a result (exit status {code})."


def effects_between(before: dict[str, list[dict]], after: dict[str, list[dict]]) -> list[dict]:
    """The diff of what the code changed: rows are matched by their position (TinyDB doc id, 1-based,
    kept in each effect as `doc_id`)."""
    effects = []
    for name, rows in before.items():
        final = {doc["doc_id"]: doc["data"] for doc in after.get(name, [])}
        for doc_id, row in enumerate(rows, start=1):
            if doc_id not in final:
                effects.append({"table": name, "op": "delete", "before": row, "after": None, "doc_id": doc_id})
            elif final[doc_id] != row:
                effects.append({"table": name, "op": "update", "before": row, "after": final[doc_id], "doc_id": doc_id})
        for doc_id in sorted(d for d in final if d > len(rows)):
            effects.append({"table": name, "op": "insert", "before": None, "after": final[doc_id], "doc_id": doc_id})
    return effects


class Template:
    """A pre-imported process that forks one fresh, walled child per run (child.serve). One per worker
    process; runs are serialised on it, and a run that finds it busy or not yet ready goes cold."""

    def __init__(self):
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.ready = False
        config = json.dumps({"paths": PATHS, "modules": sorted(policy.ALLOWED_IMPORTS)})
        self.process = _spawn_child("--template", config)

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout_s: float) -> bool:
        if not self.ready:
            self.ready = _read_frame(self.process.stdout.fileno(), time.monotonic() + timeout_s) == b"ready"
        return self.ready

    def run(self, payload: dict, timeout_s: float) -> Outcome | None:
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if not self.wait_ready(0):
                return None
            body = json.dumps(payload, default=str).encode()
            try:
                child.write_frame(self.process.stdin.fileno(), body)
            except OSError:
                self.stop()
                return None
            # The template enforces the deadline itself; this one only catches a template that hangs.
            answer = _read_frame(self.process.stdout.fileno(), time.monotonic() + timeout_s + 5)
            if answer is None:
                self.stop()
                return Outcome(b"", timed_out=True, overflow=False, exit=None)
            frame = json.loads(answer)
            return Outcome(frame["out"].encode(), frame["timed_out"], frame["overflow"], frame["exit"])
        finally:
            self.lock.release()

    def stop(self) -> None:
        """Closing stdin ends the template; SIGKILL if it does not go. Its runs die with it (PDEATHSIG)."""
        self.ready = False
        for stream in (self.process.stdin, self.process.stdout):
            stream.close()
        try:
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            child.kill_group(self.process.pid)
            self.process.wait()

    def forget(self) -> None:
        """In a forked copy of the owner: drop the inherited pipes, leave the owner's template alone."""
        for stream in (self.process.stdin, self.process.stdout):
            try:
                os.close(stream.fileno())
            except (OSError, ValueError):
                pass


def _read_frame(descriptor: int, deadline: float) -> bytes | None:
    header = _read_exactly(descriptor, 4, deadline)
    if header is None:
        return None
    return _read_exactly(descriptor, int.from_bytes(header, "big"), deadline)


def _read_exactly(descriptor: int, size: int, deadline: float) -> bytes | None:
    import select

    data = b""
    while len(data) < size:
        if not select.select([descriptor], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return None
        chunk = os.read(descriptor, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


_template: Template | None = None
_template_lock = threading.Lock()


def template(*, start: bool = True) -> Template | None:
    """This process's template: started on first use, replaced if it died."""
    global _template  # noqa: PLW0603 (one template per process)
    with _template_lock:
        if _template is not None and not _template.alive():
            _template.stop()
            _template = None
        if _template is None and start:
            _template = Template()
        return _template


def template_run(payload: dict, timeout_s: float) -> Outcome | None:
    current = template()
    return current.run(payload, timeout_s) if current else None


def warm_up(timeout_s: float = 10) -> bool:
    """Start this process's template and wait until it is ready (benchmarks, worker start-up)."""
    current = template()
    if current is None or not current.lock.acquire(timeout=timeout_s):
        return False
    try:
        return current.wait_ready(timeout_s)
    finally:
        current.lock.release()


def stop_template() -> None:
    global _template  # noqa: PLW0603
    with _template_lock:
        if _template is not None:
            _template.stop()
            _template = None


def _after_fork_in_child() -> None:
    global _template, _template_lock  # noqa: PLW0603
    _template_lock = threading.Lock()
    if _template is not None:
        _template.forget()
        _template = None


os.register_at_fork(after_in_child=_after_fork_in_child)
