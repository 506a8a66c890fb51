"""Escape techniques end contained with the language policy on, and again with it off (the operating system
alone). Each technique, when it works, goes on to do harm the test can see: create the marker file, read
the secret (from its file, this process's descriptor or environment), kill the victim process or connect
to the listening socket. Contained means none of that happened."""

import pytest

from sandbox.runner import run_code

# What an escape does with an `os` module once it has one (the names avoid underscores so that, with the
# policy on, it is the technique itself that is refused).
HARM = """
def harm(stolen):
    for attempt in (
        lambda: stolen.system("touch MARKER"),
        lambda: stolen.close(stolen.open("MARKER", stolen.O_CREAT | stolen.O_WRONLY)),
        lambda: stolen.read(stolen.open("SECRET_PATH", stolen.O_RDONLY), 200).decode(),
        lambda: stolen.read(SECRET_FD, 200).decode(),
        lambda: stolen.environ.get("COUNTERSIGN_TEST_SECRET", ""),
        lambda: stolen.kill(VICTIM, 9),
    ):
        try:
            print(attempt())
        except Exception as error:
            print(error)
"""

ESCAPES = {
    "class hierarchy walk to os": HARM + "for cls in ().__class__.__bases__[0].__subclasses__():\n"
    "    if cls.__name__ == '_wrap_close':\n        harm(cls.__init__.__globals__['sys'].modules['os'])",
    "mro walk to os": HARM + "for cls in [].__class__.__mro__[1].__subclasses__():\n"
    "    if cls.__name__ == '_wrap_close':\n        harm(cls.__init__.__globals__['sys'].modules['os'])",
    "frame walk up to the child's globals": HARM
    + "import sys\nframe = sys._getframe()\nwhile frame.f_back:\n    frame = frame.f_back\nharm(frame.f_globals['os'])",
    "generator frame walk": HARM + "g = (x for x in [1])\nharm(g.gi_frame.f_back.f_globals['os'])",
    "traceback frame walk": HARM + "try:\n    1 / 0\nexcept Exception as error:\n    frame = error.__traceback__.tb_frame\n"
    "    while frame.f_back:\n        frame = frame.f_back\n    harm(frame.f_globals['os'])",
    "exception context walk": HARM + "try:\n    try:\n        1 / 0\n    except Exception:\n        raise ValueError()\n"
    "except ValueError as error:\n    harm(error.__context__.__traceback__.tb_frame.f_globals['__builtins__']['__import__']('os'))",
    "__globals__ of a helper": HARM
    + "print(get_current_balance.__globals__)\nharm(get_current_balance.__globals__['__builtins__']['__import__']('os'))",
    "__globals__ of the import guard": HARM + "harm(__builtins__['__import__'].__globals__['sys'].modules['os'])",
    "__globals__ of a TinyDB method": HARM + "harm(db.table.__globals__['os'])",
    "match class pattern on a helper's globals": HARM
    + "match get_current_balance:\n    case object(__globals__=found):\n        harm(found.get('os') or found['sys'].modules['os'])",
    "match class pattern walking from a table": HARM + "match inventory_tbl:\n    case object(__class__=cls):\n        match cls.insert:\n"
    "            case object(__globals__=found):\n                harm(found['os'])",
    "match capture named __builtins__": HARM + "match {'x': 1}:\n    case {**__builtins__}:\n        harm(__import__('os'))",
    "match star capture to a dunder": HARM + "match [1, 2]:\n    case [*__all__]:\n        harm(__import__('os'))",
    "match capture with as": HARM + "match 1:\n    case int() as __loader__:\n        harm(__import__('os'))",
    "match keyword fetching str.format": "match '{0.__init__.__globals__}':\n    case str(format=fmt):\n        print(fmt(get_current_balance))",
    "format string attribute access": "print('{0.__globals__}'.format(get_current_balance))",
    "format string held in a variable": "template = '{0.__globals__}'\nprint(template.format(get_current_balance))",
    "format_map": "print('{x.__globals__}'.format_map({'x': get_current_balance}))",
    "string.Formatter get_field": HARM
    + "import string\nfound = string.Formatter().get_field('0.__globals__', (get_current_balance,), {})[0]\n"
    "harm(found['__builtins__']['__import__']('os'))",
    "f-string dunder": HARM + "print(f'{get_current_balance.__globals__}')\nharm(__import__('os'))",
    "getattr with a built string": HARM + "harm(getattr(getattr(get_current_balance, '__glo' + 'bals__'), 'get')('os'))",
    "decorator calling eval": HARM + "@eval\ndef code():\n    pass\nharm(eval(\"__import__('os')\"))",
    "decorator factory reaching builtins": HARM
    + "def steal(function):\n    harm(function.__globals__['__builtins__']['__import__']('os'))\n    return function\n"
    "@steal\ndef victim():\n    pass",
    "metaclass": HARM + "class Meta(type):\n    def __new__(mcs, *args):\n        harm(__import__('os'))\n"
    "        return super().__new__(mcs, *args)\nclass Planted(metaclass=Meta):\n    pass",
    "__init_subclass__ hook": HARM
    + "class Base:\n    def __init_subclass__(cls):\n        harm(__import__('os'))\nclass Child(Base):\n    pass",
    "unicode identifier for eval": HARM + "ｅｖａｌ(\"harm(__import__('os'))\")",
    "unicode underscores": HARM + "harm(ｇｅｔ＿ｃｕｒｒｅｎｔ＿ｂａｌａｎｃｅ.＿＿globals＿＿['sys'])",
    "source encoding declaration": "# -*- coding: utf-7 -*-\nimport os\nos.system('touch MARKER')",
    "__import__": HARM + "harm(__import__('os'))",
    "import os": HARM + "import os\nharm(os)",
    "subprocess": "import subprocess\nsubprocess.run(['touch', 'MARKER'])\nprint(subprocess.run(['cat', 'SECRET_PATH'], capture_output=True).stdout)",
    "importlib": HARM + "import importlib\nharm(importlib.import_module('os'))",
    "ctypes system()": "import ctypes\nctypes.CDLL(None).system(b'touch MARKER')",
    "ctypes open and read": "import ctypes\nlibc = ctypes.CDLL(None)\nbuffer = ctypes.create_string_buffer(200)\n"
    "descriptor = libc.open(b'SECRET_PATH', 0)\nlibc.read(descriptor, buffer, 200)\nprint(buffer.value)",
    "pickle": "import pickle\npickle.loads(b\"cos\\nsystem\\n(S'touch MARKER'\\ntR.\")",
    "exec of a string": "exec(\"import os; os.system('touch MARKER')\")",
    "compile and eval": "eval(compile(\"__import__('os').system('touch MARKER')\", 'x', 'eval'))",
    "globals() to builtins": HARM + "harm(globals()['__builtins__']['__import__']('os'))",
    "vars() of the plan": HARM + "harm(vars()['__builtins__']['__import__']('os'))",
    "code object swap": HARM + "def plain():\n    return 1\nplain.__code__ = (lambda: __import__('os')).__code__\nharm(plain())",
    "breakpoint": "breakpoint()",
    "open the secret": "print(open('SECRET_PATH').read())",
    "type() class factory": HARM + "Planted = type('Planted', (), {'x': 1})\nharm(Planted.__init__.__globals__['os'])",
    "private attribute of an allowed module": HARM + "import re\nharm(re._compiler._sre.__loader__)\nharm(re.sys.modules['os'])",
    "submodule walk from an allowed module": HARM + "import json\nharm(json.decoder.re.enum.sys.modules['os'])",
    "walk to sys from collections": HARM + "import collections\nharm(collections.abc.sys.modules['os'])",
    "typing.get_type_hints evaluates strings": "import typing\n"
    "def annotated(x: \"__import__('os').system('touch MARKER')\"):\n    pass\ntyping.get_type_hints(annotated)",
    "descriptor theft with pidfd_getfd": "import ctypes\nlibc = ctypes.CDLL(None)\n"
    "pidfd = libc.syscall(434, PARENT, 0)\nstolen = libc.syscall(438, pidfd, SECRET_FD, 0)\n"
    "buffer = ctypes.create_string_buffer(200)\nlibc.read(stolen, buffer, 200)\nprint(buffer.value)",
    "inherited descriptors": HARM
    + "import os\nfor number in range(64):\n    try:\n        print(os.read(number, 200))\n    except Exception:\n        pass",
    "signal another process": "import os\nos.kill(VICTIM, 9)",
    "signal a process group": "import os\nos.killpg(os.getpgid(VICTIM), 9)",
    "tgkill through ctypes": "import ctypes\nctypes.CDLL(None).syscall(234, VICTIM, VICTIM, 9)",
    "/proc of the parent": "print(open('/proc/PARENT/environ').read())",
    "/proc descriptor of the parent": "print(open('/proc/PARENT/fd/SECRET_FD').read())",
    "/proc root of the parent": "print(open('/proc/PARENT/root/SECRET_PATH').read())",
    "symlink to the secret": "import os\nos.symlink('SECRET_PATH', '/tmp/countersign-link')\nprint(open('/tmp/countersign-link').read())",
    "hard link to the secret": "import os\nos.link('SECRET_PATH', 'MARKER')",
    "connect to a local socket": "import socket\nsocket.create_connection(('127.0.0.1', PORT)).sendall(b'x')",
    "fork and write after the run": "import os\nif os.fork() == 0:\n    open('MARKER', 'w').write('x')",
    "thread that outlives the code": "import _thread\n_thread.start_new_thread(lambda: open('MARKER', 'w').write('x'), ())",
    "raise own limits then fork": "import resource, os\nresource.setrlimit(resource.RLIMIT_NPROC, (1000, 1000))\nos.fork()",
}


def test_there_are_at_least_40_escape_techniques():
    assert len(ESCAPES) >= 40


@pytest.mark.parametrize("policy", ["policy on", "policy off"])
@pytest.mark.parametrize("code", ESCAPES.values(), ids=ESCAPES.keys())
def test_an_escape_technique_is_contained(code, policy, bait):
    result = run_code(bait.fill(code), tables={"inventory": [{"name": "Aviator"}]}, unsafe_disable_language_policy=policy == "policy off")
    assert bait.untouched(result) == [], result
    for module in ("os", "sys", "ctypes", "subprocess"):
        assert f"<module '{module}'" not in result.stdout + result.answer_text, "a dangerous module was reachable"
    if policy == "policy on":
        assert result.status in {"policy_violation", "error"}, result
