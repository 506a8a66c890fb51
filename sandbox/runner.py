"""run_code: LLM-written Python in a fresh, isolated child process; what it would change comes back as
effects (a diff), and nothing real changes here."""

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
from sandbox import policy

CHILD = Path(__file__).with_name("child.py")
TINYDB_PATH = str(Path(tinydb.__file__).resolve().parent.parent)
PYSECCOMP_PATHS: list[str] = []
try:
    import pyseccomp

    _location = Path(pyseccomp.__file__).resolve()
    PYSECCOMP_PATHS = [str(_location.parent if _location.name == "pyseccomp.py" else _location.parent.parent)]
except ImportError:  # the child then runs without a seccomp filter and says so in its isolation report
    pass


@functools.cache
def libraries() -> dict[str, str]:
    """Shared libraries the child may need (found once per process, on first use: find_library runs
    ldconfig, which is slow)."""
    found = {name: ctypes.util.find_library(name) for name in ("c", "seccomp")}
    return {name: path for name, path in found.items() if path}


DEFAULT_LIMITS = {"memory_mb": 256, "output_chars": 20_000, "recursion": 1000}
STDOUT_CAP_BYTES = 8_000_000


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


def _read_capped(stream, sink: list, cap: int, overflow: threading.Event) -> None:
    total = 0
    while chunk := stream.read(65536):
        total += len(chunk)
        if total > cap:
            overflow.set()
            return
        sink.append(chunk)


def _communicate(process: subprocess.Popen, payload: bytes, timeout_s: float, cap: int) -> tuple[bytes, bool, bool]:
    out: list[bytes] = []
    overflow = threading.Event()
    reader = threading.Thread(target=_read_capped, args=(process.stdout, out, cap, overflow), daemon=True)
    reader.start()
    try:
        process.stdin.write(payload)
        process.stdin.close()
    except BrokenPipeError:
        pass
    deadline = time.monotonic() + timeout_s
    timed_out = False
    while process.poll() is None:
        if overflow.is_set() or time.monotonic() > deadline:
            timed_out = not overflow.is_set()
            break
        time.sleep(0.002)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join(timeout=2)
    return b"".join(out), timed_out, overflow.is_set()


def run_code(
    code: str,
    *,
    tables: dict[str, list[dict]],
    user_request: str = "",
    timeout_s: float = 5,
    memory_mb: int | None = None,
    output_chars: int | None = None,
    unsafe_disable_language_policy: bool = False,
) -> SandboxResult:
    """Run `code` against copies of `tables`. `unsafe_disable_language_policy` exists only so tests can
    show that the operating-system wall holds on its own; never set it for real plans."""
    started = time.monotonic()
    if not unsafe_disable_language_policy:
        violations = policy.check(code)
        if violations:
            return SandboxResult(
                status="policy_violation", error=" ".join(violations), duration_ms=int((time.monotonic() - started) * 1000)
            )
    limits = _settings_limits()
    if memory_mb:
        limits["memory_mb"] = memory_mb
    if output_chars:
        limits["output_chars"] = output_chars
    limits["cpu_s"] = max(1, int(timeout_s) + 1)
    payload = json.dumps(
        {
            "code": code,
            "tables": tables,
            "user_request": user_request,
            "limits": limits,
            "paths": [TINYDB_PATH, *PYSECCOMP_PATHS],
            "libraries": libraries(),
            "allowed_imports": sorted(policy.ALLOWED_IMPORTS),
            "preload": policy.imported_modules(code) if not unsafe_disable_language_policy else [],
            "unsafe_disable_language_policy": unsafe_disable_language_policy,
        },
        default=str,
    ).encode()
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", str(CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={},
        cwd="/",
        start_new_session=True,
        close_fds=True,
    )
    out, timed_out, overflow = _communicate(process, payload, timeout_s, STDOUT_CAP_BYTES)
    duration = int((time.monotonic() - started) * 1000)
    if timed_out:
        return SandboxResult(
            status="timeout", error=f"The code ran longer than {timeout_s:g} s and was stopped.", limit="time", duration_ms=duration
        )
    if overflow:
        return SandboxResult(
            status="limit_exceeded", limit="output", error="The code wrote more output than allowed.", duration_ms=duration
        )
    try:
        raw = json.loads(out)
    except (json.JSONDecodeError, UnicodeDecodeError):
        cause = _exit_cause(process.returncode)
        return SandboxResult(status=cause[0], limit=cause[1], error=cause[2], duration_ms=duration)
    result = SandboxResult(
        status=raw.get("status", "error"),
        answer_text=str(raw.get("answer_text", ""))[:5000],
        code_status=str(raw.get("code_status", ""))[:100],
        stdout=str(raw.get("stdout", ""))[: limits["output_chars"]],
        error=str(raw.get("error", ""))[:2000],
        limit=str(raw.get("limit", "")),
        duration_ms=duration,
        isolation=raw.get("isolation", {}),
    )
    if result.status in {"ok", "error"} and isinstance(raw.get("tables"), dict):
        result.effects = effects_between(tables, raw["tables"])
    return result


def _exit_cause(code: int | None) -> tuple[str, str, str]:
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
