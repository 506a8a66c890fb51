"""The sandbox child: runs one piece of LLM-written code under OS isolation, then exits.

Started by sandbox.runner as `python -I -S child.py` with an empty environment; reads one JSON payload
from stdin and writes one JSON result to stdout. Before the code runs it: moves into a private network
namespace (where the kernel allows), sets rlimits (CPU, address space, processes, file size, open files),
pre-imports every module the code may use, and loads a seccomp filter that refuses sockets, new processes,
exec, and every way of opening or changing files. Imports nothing from the project.
"""

import ctypes
import errno
import io
import json
import os
import resource
import sys
import time

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_THREAD = 0x00010000


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


def private_network() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    for flags in (CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET):
        if libc.unshare(flags) == 0:
            return True
    return False


def set_limits(limits: dict) -> None:
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # not enforced for root; seccomp is what stops fork
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


DENY = [
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg", "recvfrom", "recvmsg",
    "fork", "vfork", "execve", "execveat", "ptrace", "kill", "tkill", "process_vm_readv", "process_vm_writev",
    "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "mknod", "mknodat",
    "mount", "umount2", "chroot", "pivot_root", "unshare", "setns", "bpf", "io_uring_setup", "keyctl", "add_key", "request_key",
    "personality", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "userfaultfd", "perf_event_open",
]  # fmt: skip


# x86_64 syscall numbers of DENY (asm/unistd_64.h). On this architecture the filter is written directly
# as classic BPF, which costs nothing to build; elsewhere libseccomp (pyseccomp) resolves the names.
X86_64 = {
    "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288, "sendto": 44,
    "sendmsg": 46, "recvfrom": 45, "recvmsg": 47, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
    "kill": 62, "tkill": 200, "process_vm_readv": 310, "process_vm_writev": 311, "open": 2, "openat": 257, "openat2": 437,
    "creat": 85, "open_by_handle_at": 304, "name_to_handle_at": 303, "mkdir": 83, "mkdirat": 258, "rmdir": 84, "unlink": 87,
    "unlinkat": 263, "rename": 82, "renameat": 264, "renameat2": 316, "link": 86, "linkat": 265, "symlink": 88,
    "symlinkat": 266, "chmod": 90, "fchmod": 91, "fchmodat": 268, "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
    "truncate": 76, "mknod": 133, "mknodat": 259, "mount": 165, "umount2": 166, "chroot": 161, "pivot_root": 155,
    "unshare": 272, "setns": 308, "bpf": 321, "io_uring_setup": 425, "keyctl": 250, "add_key": 248, "request_key": 249,
    "personality": 135, "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setresuid": 117,
    "setresgid": 119, "userfaultfd": 323, "perf_event_open": 298,
}  # fmt: skip
X86_64_CLONE, X86_64_CLONE3 = 56, 435
AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000
RET_EPERM, RET_ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def bpf_program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k): kill other architectures and the x32 ABI, refuse DENY with
    EPERM, clone without CLONE_THREAD (a fork) with EPERM, clone3 with ENOSYS, allow the rest."""
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    program = [
        (load, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, AUDIT_ARCH_X86_64),
        (ret, 0, 0, RET_KILL_PROCESS),
        (load, 0, 0, 0),  # seccomp_data.nr
        (jge, 0, 1, 0x40000000),  # x32 system calls
        (ret, 0, 0, RET_KILL_PROCESS),
        (jeq, 0, 1, X86_64_CLONE3),
        (ret, 0, 0, RET_ENOSYS),
        (jeq, 0, 4, X86_64_CLONE),
        (load, 0, 0, 16),  # args[0], low 32 bits: the clone flags
        (jset, 1, 0, CLONE_THREAD),
        (ret, 0, 0, RET_EPERM),
        (ret, 0, 0, RET_ALLOW),
    ]
    for number in sorted(set(X86_64.values())):
        program += [(jeq, 0, 1, number), (ret, 0, 0, RET_EPERM)]
    program.append((ret, 0, 0, RET_ALLOW))
    return program


def load_seccomp(libraries: dict) -> bool:
    if os.uname().machine == "x86_64":
        libc = ctypes.CDLL(None, use_errno=True)
        instructions = bpf_program()
        filters = (SockFilter * len(instructions))(*[SockFilter(*instruction) for instruction in instructions])
        program = SockFprog(len(instructions), filters)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return libc.prctl(22, 2, ctypes.byref(program), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    return _load_with_libseccomp(libraries)


def _load_with_libseccomp(libraries: dict) -> bool:
    import ctypes.util

    # find_library shells out to ldconfig (~15 ms a call); the parent already knows the answers.
    known = dict(libraries)
    original = ctypes.util.find_library
    ctypes.util.find_library = lambda name: known.get(name) or original(name)
    try:
        import pyseccomp as seccomp
    except ImportError:
        return False
    denied = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENY:
        try:
            rules.add_rule(denied, name)
        except Exception:  # noqa: BLE001, S112 (a syscall this kernel or arch does not have needs no rule)
            continue
    # glibc's fork() is clone() without CLONE_THREAD: refuse that, keep threads working.
    rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    try:
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    except Exception:  # noqa: BLE001, S110 (older kernels have no clone3)
        pass
    rules.load()
    return True


def table_helpers():
    def get_current_balance(tbl) -> float:
        rows = tbl.all()
        return float(rows[-1].get("balance_after_transaction", 0)) if rows else 0.0

    def next_transaction_id(tbl, prefix: str = "TXN") -> str:
        numbers = []
        for row in tbl.all():
            value = str(row.get("transaction_id", ""))
            if value.startswith(prefix) and value[len(prefix) :].isdigit():
                numbers.append(int(value[len(prefix) :]))
        return f"{prefix}{(max(numbers) if numbers else 0) + 1:03d}"

    return get_current_balance, next_transaction_id


class ModuleView:
    """What `import x` gives LLM code: the module's public, non-module attributes only, so no walk from
    an allowed module reaches os, sys or builtins."""

    def __init__(self, module):
        for name in dir(module):
            value = getattr(module, name)
            if not name.startswith("_") and type(value).__name__ != "module":
                object.__setattr__(self, name, value)
        object.__setattr__(self, "name", module.__name__)

    def __setattr__(self, name, value):
        raise AttributeError("modules are read-only here")


SAFE_BUILTINS = [
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex", "dict", "divmod",
    "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int", "isinstance", "issubclass", "iter",
    "len", "list", "map", "max", "min", "next", "oct", "ord", "pow", "print", "range", "repr", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip", "True", "False", "None", "NotImplemented", "Ellipsis",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError", "KeyError", "LookupError",
    "NameError", "OverflowError", "RuntimeError", "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
]  # fmt: skip


def restricted_builtins(allowed_imports: list[str]) -> dict:
    import builtins

    views = {}

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 (the import protocol's names)
        root = name.split(".")[0]
        if level or root not in allowed_imports or root not in sys.modules:
            raise ImportError(f"import of {name!r} is not allowed")
        if root not in views:
            views[root] = ModuleView(sys.modules[root])
        return views[root]

    safe = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    safe["__import__"] = guarded_import
    safe["__build_class__"] = builtins.__build_class__
    return safe


def main() -> None:
    # Started with an empty environment; the interpreter's own locale coercion is cleared too.
    os.environ.clear()
    payload = json.loads(sys.stdin.read())
    sys.path[:0] = payload["paths"]
    limits = payload["limits"]
    started = time.monotonic()
    # Everything the code imports is imported now (the parent read the list off its syntax tree): after
    # the seccomp filter, nothing can be opened. Only what is needed, because every import costs start-up.
    import importlib
    import traceback

    for module in payload["preload"]:
        importlib.import_module(module)

    import tinydb
    from tinydb import Query, TinyDB, where
    from tinydb.storages import MemoryStorage

    isolation = {"network_namespace": private_network()}
    db = TinyDB(storage=MemoryStorage)
    namespace_tables = {}
    for name, rows in payload["tables"].items():
        table = db.table(name)
        table.insert_multiple(rows)
        namespace_tables[name] = table
    get_current_balance, next_transaction_id = table_helpers()
    trusted = payload.get("unsafe_disable_language_policy", False)
    import builtins

    namespace = {
        "__builtins__": vars(builtins) if trusted else restricted_builtins(payload["allowed_imports"]),
        "__name__": "__plan__",
        "db": db,
        "Query": Query,
        "where": where,
        "user_request": payload["user_request"],
        "get_current_balance": get_current_balance,
        "next_transaction_id": next_transaction_id,
        **{f"{name}_tbl": table for name, table in namespace_tables.items()},
    }
    assert tinydb
    set_limits(limits)
    sys.setrecursionlimit(int(limits["recursion"]))
    isolation["seccomp"] = load_seccomp(payload.get("libraries", {}))
    captured = CappedWriter(int(limits["output_chars"]))
    result = {"status": "ok", "error": "", "limit": "", "isolation": isolation}
    real_stdout = sys.stdout
    sys.stdout = captured
    try:
        exec(compile(payload["code"], "<plan>", "exec"), namespace)  # noqa: S102 (this is the sandbox)
    except OutputLimit as error:
        result.update(status="limit_exceeded", limit="output", error=str(error))
    except MemoryError:
        result.update(status="limit_exceeded", limit="memory", error=f"memory limit of {limits['memory_mb']} MB exceeded")
    except RecursionError:
        result.update(status="error", limit="recursion", error="RecursionError: maximum recursion depth exceeded")
    except BaseException as error:  # noqa: BLE001 (whatever the code raises is reported, not propagated)
        lines = traceback.format_exception_only(type(error), error)
        result.update(status="error", error="".join(lines).strip()[-2000:])
    finally:
        sys.stdout = real_stdout
    try:
        answer = namespace.get("answer_text", "")
        status = namespace.get("STATUS", "")
        result.update(
            answer_text=answer if isinstance(answer, str) else repr(answer)[:2000],
            code_status=status if isinstance(status, str) else repr(status)[:100],
            stdout=captured.getvalue(),
            tables={name: [{"doc_id": doc.doc_id, "data": dict(doc)} for doc in table.all()] for name, table in namespace_tables.items()},
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        text = json.dumps(result, default=str)
    except MemoryError:
        text = json.dumps(
            {
                "status": "limit_exceeded",
                "limit": "memory",
                "error": "memory limit exceeded while collecting the result",
                "isolation": isolation,
            }
        )
    except (TypeError, ValueError) as error:
        text = json.dumps({"status": "error", "error": f"the result could not be collected: {error}", "isolation": isolation})
    data = text.encode()
    while data:
        data = data[os.write(1, data) :]


if __name__ == "__main__":
    main()
