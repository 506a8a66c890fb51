"""LLM-written code cannot get out: escape techniques and resource attacks all end contained, the result
names the cause, nothing happens outside, and the next run works."""

import os
import textwrap

import pytest

from sandbox.runner import run_code

SENTINEL = "/tmp/countersign-sandbox-escape"

ESCAPES = {
    "class hierarchy walk": "().__class__.__bases__[0].__subclasses__()",
    "mro walk": "[].__class__.__mro__[1].__subclasses__()",
    "generator frame walk": "g = (x for x in [1])\nf = g.gi_frame.f_back.f_globals",
    "coroutine-style frame walk": "def gen():\n    yield 1\nframe = gen().gi_frame",
    "traceback walk": "try:\n    1/0\nexcept Exception as e:\n    tb = e.__traceback__.tb_frame.f_globals",
    "with_traceback": "try:\n    1/0\nexcept Exception as e:\n    e.with_traceback(None)",
    "format string attribute access": "'{0.__class__.__bases__}'.format(())",
    "format string via variable": "template = '{0.gi_frame}'\ntemplate.format((x for x in []))",
    "format_map": "'{x.__class__}'.format_map({'x': 1})",
    "f-string dunder": "s = f'{().__class__}'",
    "getattr with built string": "getattr((), '__cl' + 'ass__')",
    "decorator calling eval": "@eval\ndef f():\n    pass",
    "metaclass": "class Meta(type):\n    pass\nclass A(metaclass=Meta):\n    pass",
    "unicode identifier for eval": "ｅｖａｌ('1+1')",
    "unicode underscores": "().＿＿class＿＿",
    "source encoding declaration": "# -*- coding: utf-7 -*-\nx = 1",
    "__import__": "__import__('os').system('touch /tmp/countersign-sandbox-escape')",
    "import os": "import os\nos.system('touch /tmp/countersign-sandbox-escape')",
    "from import": "from subprocess import run\nrun(['touch', '/tmp/countersign-sandbox-escape'])",
    "importlib": "import importlib\nimportlib.import_module('os')",
    "ctypes": "import ctypes\nctypes.CDLL(None).system(b'id')",
    "pickle": "import pickle\npickle.loads(b'cos\\nsystem\\n(S\"id\"\\ntR.')",
    "exec": "exec('import os')",
    "compile": "compile('1', 'x', 'eval')",
    "globals builtins": "globals()['__builtins__']",
    "vars and locals": "vars()",
    "lambda code object": "(lambda: 0).__code__",
    "breakpoint": "breakpoint()",
    "open a file": "open('/etc/passwd').read()",
    "type() class factory": "type('X', (), {})",
    "private attributes of a module": "import re\nre._compiler",
    "submodule walk from an allowed module": "import json\njson.decoder",
    "walk to sys from an allowed module": "import collections\ncollections.abc",
}


@pytest.mark.parametrize("code", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_techniques_are_contained(code):
    result = run_code(code, tables={"inventory": [{"name": "Aviator"}]})
    assert result.status in {"policy_violation", "error"}, result
    assert result.error, "the result names the cause"
    assert not os.path.exists(SENTINEL)
    assert result.effects == []


def test_there_are_at_least_25_escape_techniques():
    assert len(ESCAPES) >= 25


def test_most_escapes_are_stopped_before_running_with_a_readable_reason():
    blocked = {name: run_code(code, tables={}) for name, code in ESCAPES.items()}
    assert sum(result.status == "policy_violation" for result in blocked.values()) >= 28
    assert "not allowed" in blocked["import os"].error and "Line 1" in blocked["import os"].error


# The operating-system wall, with the language policy switched off (only tests may do that).
OS_LEVEL = {
    "fork": ("import os\nos.fork()", "Operation not permitted"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", "Operation not permitted"),
    "os.system": ("import os\nos.system('touch /tmp/countersign-sandbox-escape')", None),
    "subprocess": ("import subprocess\nsubprocess.run(['id'])", "Operation not permitted"),
    "read a secret file": ("open('/etc/shadow').read()", "Operation not permitted"),
    "read the project database": ("open('/work/main/var/countersign.sqlite3', 'rb').read()", "Operation not permitted"),
    "file write": ("open('/tmp/countersign-sandbox-escape', 'w').write('x')", "Operation not permitted"),
    "list the filesystem": ("import os\nos.listdir('/')", "Operation not permitted"),
    "connect to redis": ("import socket\nsocket.create_connection(('127.0.0.1', 6379))", "Operation not permitted"),
    "connect to postgres": ("import socket\nsocket.create_connection(('127.0.0.1', 5432))", "Operation not permitted"),
    "import something new": ("import sqlite3", "Operation not permitted"),
}


@pytest.mark.parametrize("code, message", OS_LEVEL.values(), ids=OS_LEVEL.keys())
def test_the_os_wall_holds_without_the_language_policy(code, message):
    result = run_code(code, tables={}, unsafe_disable_language_policy=True)
    assert result.isolation.get("seccomp") is True
    if message:
        assert result.status == "error" and message in result.error, result
    assert not os.path.exists(SENTINEL)


def test_os_system_reports_failure_instead_of_running():
    result = run_code("import os\nanswer_text = str(os.system('id'))", tables={}, unsafe_disable_language_policy=True)
    assert result.status == "ok" and result.answer_text != "0"


def test_the_child_has_no_network_and_an_empty_environment():
    result = run_code("import os\nanswer_text = repr(dict(os.environ))", tables={}, unsafe_disable_language_policy=True)
    assert result.answer_text == "{}"
    assert result.isolation["network_namespace"] is True


RESOURCE_ATTACKS = {
    "endless loop": ("while True:\n    pass", {"timeout"}, "time"),
    "memory bomb": ("x = ' ' * (1 << 34)", {"limit_exceeded"}, "memory"),
    "growing memory": ("blocks = []\nwhile True:\n    blocks.append(bytearray(10_000_000))", {"limit_exceeded", "timeout"}, None),
    "huge output": ("while True:\n    print('x' * 1000)", {"limit_exceeded"}, "output"),
    "deep recursion": ("def f(n):\n    return f(n + 1)\nf(0)", {"error"}, "recursion"),
    "huge integer": ("x = 10 ** (10 ** 9)", {"timeout", "limit_exceeded"}, None),
    "huge integer to text": ("x = str(10 ** 100000)", {"error"}, None),
    "catastrophic regex": ("import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", {"timeout"}, "time"),
    "sleeping": ("import time\ntime.sleep(60)", {"timeout"}, "time"),
}


@pytest.mark.parametrize("code, statuses, limit", RESOURCE_ATTACKS.values(), ids=RESOURCE_ATTACKS.keys())
def test_resource_attacks_end_contained_and_name_the_cause(code, statuses, limit):
    result = run_code(code, tables={}, timeout_s=2)
    assert result.status in statuses, result
    if limit:
        assert result.limit == limit
    assert result.error
    assert result.duration_ms < 10_000
    follow_up = run_code("answer_text = 'still here'\nSTATUS = 'success'", tables={})
    assert follow_up.status == "ok" and follow_up.answer_text == "still here"


def test_tables_are_copies_and_changes_come_back_as_effects():
    tables = {
        "inventory": [{"item_id": "SG001", "quantity_in_stock": 3}],
        "transactions": [{"transaction_id": "TXN001", "balance_after_transaction": 500.0}],
    }
    code = textwrap.dedent(
        """
        Item = Query()
        inventory_tbl.update({"quantity_in_stock": 1}, Item.item_id == "SG001")
        transactions_tbl.insert({"transaction_id": next_transaction_id(transactions_tbl), "balance_after_transaction": get_current_balance(transactions_tbl) + 10})
        answer_text = "done"
        STATUS = "success"
        """
    )
    result = run_code(code, tables=tables)
    assert result.status == "ok" and tables["inventory"][0]["quantity_in_stock"] == 3
    assert result.effects == [
        {
            "table": "inventory",
            "op": "update",
            "before": {"item_id": "SG001", "quantity_in_stock": 3},
            "after": {"item_id": "SG001", "quantity_in_stock": 1},
            "doc_id": 1,
        },
        {
            "table": "transactions",
            "op": "insert",
            "before": None,
            "after": {"transaction_id": "TXN002", "balance_after_transaction": 510.0},
            "doc_id": 2,
        },
    ]


# The wave-1 deny list, kept here as its own list (x86_64 numbers from asm/unistd_64.h): under the allow
# list every one of these still answers EPERM.
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


def test_every_denied_system_call_answers_eperm_inside_the_child():
    if os.uname().machine != "x86_64":
        pytest.skip("the hand-written filter table is for x86_64; other machines use libseccomp")
    code = textwrap.dedent(
        f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        refused = []
        for name, number in {sorted(X86_64.items())!r}:
            # Invalid arguments: the filter answers before the kernel looks at them.
            if libc.syscall(number, -1, 0, 0, 0, 0) == -1 and ctypes.get_errno() == 1:
                refused.append(name)
        answer_text = ",".join(refused)
        """
    )
    result = run_code(code, tables={}, unsafe_disable_language_policy=True)
    assert result.status == "ok", result
    assert set(result.answer_text.split(",")) == set(X86_64)


def test_threads_still_work_under_the_filter():
    code = "import _thread\nlock = _thread.allocate_lock()\nlock.acquire()\n_thread.start_new_thread(lambda: lock.release(), ())\nlock.acquire()\nanswer_text = 'thread ran'"
    result = run_code(code, tables={}, unsafe_disable_language_policy=True)
    assert result.status == "ok" and result.answer_text == "thread ran", result
