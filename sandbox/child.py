"""The sandbox's own processes: run one piece of LLM-written code behind the operating-system wall.

Started by sandbox.runner as `python -I -S -B child.py` with an empty environment, in one of two modes:

- cold (no argument): read one JSON payload from stdin, run it, write one JSON result to stdout, exit.
- template (`--template PATHS`): import everything a plan may use once, then serve runs over stdin/stdout
  as length-prefixed frames; every run forks a fresh process that goes through the same wall as a cold run
  (so no state survives a run: the template itself never runs code).

Either way the process that holds the payload becomes nobody, enters new namespaces (sandbox/wall.py) and
forks; the fork is PID 1 of its own PID namespace, seals itself in (empty root, no capabilities, rlimits,
only its pipes, the seccomp allow list) and runs the code. Imports nothing from the project but wall.py.
"""

import io
import json
import os
import select
import signal
import sys
import time

if __package__:
    from sandbox import wall
else:  # run as a script with -I: its own folder is not on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import wall

    del sys.path[0]

RESULT_CAP_BYTES = 8_000_000

# The helpers a plan calls are built from this source in a module of their own whose globals hold only the
# few builtins they use: nothing defined here (and so no ctypes, os or sys) is reachable from them.
HELPERS_SOURCE = '''
def get_current_balance(tbl):
    rows = tbl.all()
    return float(rows[-1].get("balance_after_transaction", 0)) if rows else 0.0


def next_transaction_id(tbl, prefix="TXN"):
    numbers = []
    for row in tbl.all():
        value = str(row.get("transaction_id", ""))
        if value.startswith(prefix) and value[len(prefix):].isdigit():
            numbers.append(int(value[len(prefix):]))
    return f"{prefix}{(max(numbers) if numbers else 0) + 1:03d}"


class ModuleView:
    """What `import x` gives a plan: the module's public attributes that are not modules themselves."""

    def __init__(self, name, attributes):
        for key, value in attributes.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "name", name)

    def __setattr__(self, name, value):
        raise AttributeError("modules are read-only here")


def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    root = name.split(".")[0]
    if level or root not in views:
        raise ImportError(f"import of {name!r} is not allowed")
    return views[root]
'''
HELPER_BUILTINS = ("float", "str", "int", "max", "len", "object", "AttributeError", "ImportError", "__build_class__")

SAFE_BUILTINS = [
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex", "dict", "divmod",
    "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int", "isinstance", "issubclass", "iter",
    "len", "list", "map", "max", "min", "next", "oct", "ord", "pow", "print", "range", "repr", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip", "True", "False", "None", "NotImplemented", "Ellipsis",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError", "KeyError", "LookupError",
    "NameError", "OverflowError", "RuntimeError", "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
]  # fmt: skip


class OutputLimit(Exception):
    pass


class CappedWriter(io.TextIOBase):
    def __init__(self, limit: int):
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit

    def write(self, text: str) -> int:
        self.size += len(text)
        if self.size > self.limit:
            raise OutputLimit(f"output exceeded {self.limit} characters")
        self.parts.append(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


def preload(payload: dict) -> None:
    """Import now what the code imports (the parent read it off the syntax tree): behind the wall nothing
    can be opened."""
    import importlib

    for module in payload.get("preload", []):
        importlib.import_module(module)
    import tinydb.storages  # noqa: F401


class NothingNew:
    """The only import finder behind the wall: a module not imported before it cannot be loaded now (the
    filter refuses every open), and the message says so instead of a misleading ModuleNotFoundError."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        raise ImportError(f"[Errno 1] Operation not permitted: {name!r} was not loaded before the sandbox closed")


def run_walled(payload: dict) -> int:
    """In the process that will be the run's parent: enter the namespaces, fork PID 1, wait for it. The
    result goes to fd 1. Returns the exit status to report (128 + signal when PID 1 was killed)."""
    parent = os.getppid()
    wall.keep_only_pipes(1)
    try:
        wall.enter_namespaces()
        wall.die_with_parent(signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
            return 1
    except wall.Refused as error:
        send_result({"status": "error", "error": f"Code plans are unavailable: {error}.", "isolation": {"refused": str(error)}})
        return 0
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            status = pid_one(payload)
        finally:
            os._exit(status)
    os.close(1)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def pid_one(payload: dict) -> int:
    """PID 1 of the run's namespace: seal in, run the code, write the result."""
    try:
        wall.die_with_parent(signal.SIGKILL)
        wall.empty_root()
        wall.drop_capabilities()
        isolation = wall.facts()
        if isolation["pid"] != 1 or isolation["uid"] != wall.NOBODY or not isolation["capabilities_empty"]:
            raise wall.Refused(f"the sandbox process is not isolated as required ({isolation})")
        isolation |= {"namespaces": sorted(wall.NAMESPACES), "network_namespace": True, "filesystem": "empty"}
        isolation["template"] = bool(payload.get("template"))
        namespace, tables = build_namespace(payload)
        limits = payload["limits"]
        wall.set_limits(limits)
        sys.setrecursionlimit(int(limits["recursion"]))
        wall.load_seccomp(payload.get("libraries", {}))
        isolation["seccomp"] = True
        sys.meta_path[:] = [NothingNew]
        sys.path_importer_cache.clear()
    except wall.Refused as error:
        send_result({"status": "error", "error": f"Code plans are unavailable: {error}.", "isolation": {"refused": str(error)}})
        return 0
    except Exception as error:  # noqa: BLE001 (a broken start is reported; nothing runs)
        refused = f"the sandbox could not start: {type(error).__name__}: {error}"
        send_result({"status": "error", "error": f"Code plans are unavailable: {refused}.", "isolation": {"refused": refused}})
        return 0
    send_result(execute(payload["code"], namespace, tables, limits, isolation))
    return 0


def build_namespace(payload: dict) -> tuple[dict, dict]:
    import builtins

    from tinydb import Query, TinyDB, where
    from tinydb.storages import MemoryStorage

    db = TinyDB(storage=MemoryStorage)
    tables = {}
    for name, rows in payload["tables"].items():
        tables[name] = db.table(name)
        tables[name].insert_multiple(rows)
    trusted = payload.get("unsafe_disable_language_policy", False)
    helpers = {"__builtins__": {name: getattr(builtins, name) for name in HELPER_BUILTINS}, "__name__": "plan_helpers", "views": {}}
    exec(compile(HELPERS_SOURCE, "<plan helpers>", "exec"), helpers)  # noqa: S102 (our own source, see above)
    for name, attributes in ({} if trusted else public_attributes(payload.get("preload", []))).items():
        helpers["views"][name] = helpers["ModuleView"](name, attributes)
    if trusted:
        code_builtins = vars(builtins)
    else:
        code_builtins = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
        code_builtins |= {"__import__": helpers["guarded_import"], "__build_class__": builtins.__build_class__}
    namespace = {
        "__builtins__": code_builtins,
        "__name__": "__plan__",
        "db": db,
        "Query": Query,
        "where": where,
        "user_request": payload["user_request"],
        "get_current_balance": helpers["get_current_balance"],
        "next_transaction_id": helpers["next_transaction_id"],
        **{f"{name}_tbl": table for name, table in tables.items()},
    }
    return namespace, tables


def public_attributes(names: list[str]) -> dict[str, dict]:
    """For each module a plan may import: its public attributes that are not modules themselves, so no
    walk from an allowed module reaches os, sys or builtins."""
    found = {}
    for name in names:
        module = sys.modules.get(name)
        if module is not None:
            found[name] = {
                key: getattr(module, key)
                for key in dir(module)
                if not key.startswith("_") and type(getattr(module, key)).__name__ != "module"
            }
    return found


def execute(code: str, namespace: dict, tables: dict, limits: dict, isolation: dict) -> dict:
    captured = CappedWriter(int(limits["output_chars"]))
    result = {"status": "ok", "error": "", "limit": "", "isolation": isolation}
    real_stdout = sys.stdout
    sys.stdout = captured
    started = time.monotonic()
    try:
        exec(compile(code, "<plan>", "exec"), namespace)  # noqa: S102 (this is the sandbox)
    except OutputLimit as error:
        result.update(status="limit_exceeded", limit="output", error=str(error))
    except MemoryError:
        result.update(status="limit_exceeded", limit="memory", error=f"memory limit of {limits['memory_mb']} MB exceeded")
    except RecursionError:
        result.update(status="error", limit="recursion", error="RecursionError: maximum recursion depth exceeded")
    except BaseException as error:  # noqa: BLE001 (whatever the code raises is reported, not propagated)
        result.update(status="error", error=describe(error)[-2000:])
    finally:
        sys.stdout = real_stdout
    try:
        answer, status = namespace.get("answer_text", ""), namespace.get("STATUS", "")
        result.update(
            answer_text=answer if isinstance(answer, str) else repr(answer)[:2000],
            code_status=status if isinstance(status, str) else repr(status)[:100],
            stdout=captured.getvalue(),
            tables={name: [{"doc_id": doc.doc_id, "data": dict(doc)} for doc in table.all()] for name, table in tables.items()},
            duration_ms=int((time.monotonic() - started) * 1000),
        )
    except MemoryError:
        return {
            "status": "limit_exceeded",
            "limit": "memory",
            "error": "memory limit exceeded while collecting the result",
            "isolation": isolation,
        }
    return result


def describe(error: BaseException) -> str:
    """The last line of a traceback (the traceback module cannot be imported behind the wall)."""
    if isinstance(error, SyntaxError):
        return f"{type(error).__name__}: {error.msg} (line {error.lineno})"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def send_result(result: dict) -> None:
    try:
        text = json.dumps(result, default=str)
    except MemoryError:
        text = json.dumps({"status": "limit_exceeded", "limit": "memory", "error": "memory limit exceeded while collecting the result"})
    except (TypeError, ValueError) as error:
        text = json.dumps(
            {"status": "error", "error": f"the result could not be collected: {error}", "isolation": result.get("isolation", {})}
        )
    data = text.encode()
    while data:
        data = data[os.write(1, data) :]


def read_capped(descriptor: int, deadline: float, cap: int) -> tuple[bytes, bool, bool]:
    """Read until end of file, the deadline or more than `cap` bytes: (data, timed_out, overflow)."""
    parts, size = [], 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(parts), True, False
        ready, _, _ = select.select([descriptor], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(descriptor, 65536)
        if not chunk:
            return b"".join(parts), False, False
        size += len(chunk)
        if size > cap:
            return b"".join(parts), False, True
        parts.append(chunk)


# --- the template (warm path) --------------------------------------------------------------------------


def read_exactly(descriptor: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(descriptor, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def write_frame(descriptor: int, body: bytes) -> None:
    data = len(body).to_bytes(4, "big") + body
    while data:
        data = data[os.write(descriptor, data) :]


def serve(modules: list[str]) -> None:
    """The template: import once, then fork one fresh process per run until stdin closes."""
    for name in modules:
        __import__(name)
    preload({})
    from tinydb import Query, TinyDB, where  # noqa: F401 (warm these imports for the runs)

    compile(HELPERS_SOURCE, "<plan helpers>", "exec")
    wall.become_subreaper()
    write_frame(1, b"ready")
    while True:
        header = read_exactly(0, 4)
        if header is None:
            return
        body = read_exactly(0, int.from_bytes(header, "big"))
        if body is None:
            return
        payload = json.loads(body)
        payload["template"] = True
        write_frame(1, json.dumps(run_forked(payload)).encode())


def run_forked(payload: dict) -> dict:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setpgid(0, 0)
            os.close(read_end)
            os.dup2(write_end, 1)
            status = run_walled(payload)
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        os.setpgid(pid, pid)
    except OSError:  # the child already did, or is gone
        pass
    deadline = time.monotonic() + float(payload["timeout_s"])
    out, timed_out, overflow = read_capped(read_end, deadline, RESULT_CAP_BYTES)
    os.close(read_end)
    if not (timed_out or overflow) and not exits_by(pid, deadline):  # it closed its pipe but runs on
        timed_out = True
    if timed_out or overflow:
        kill_group(pid)
    _, status = os.waitpid(pid, 0)
    reap_orphans()
    return {"out": out.decode("utf-8", "replace"), "timed_out": timed_out, "overflow": overflow, "exit": os.waitstatus_to_exitcode(status)}


def exits_by(pid: int, deadline: float) -> bool:
    descriptor = os.pidfd_open(pid)
    try:
        return bool(select.select([descriptor], [], [], max(0.0, deadline - time.monotonic()))[0])
    finally:
        os.close(descriptor)


def reap_orphans() -> None:
    """The template is a child subreaper: a run's PID 1 whose parent was killed comes back to it, killed
    too (PDEATHSIG and the process group), and is reaped here before the run is reported."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except ProcessLookupError:
            pass


def main() -> None:
    os.environ.clear()  # started with an empty environment; the interpreter's locale coercion is cleared too
    if len(sys.argv) > 2 and sys.argv[1] == "--template":
        config = json.loads(sys.argv[2])
        sys.path[:0] = config["paths"]
        serve(config["modules"])
        return
    payload = json.loads(sys.stdin.buffer.read())
    sys.path[:0] = payload["paths"]
    preload(payload)
    sys.stdout.flush()
    os._exit(run_walled(payload))


if __name__ == "__main__":
    main()
