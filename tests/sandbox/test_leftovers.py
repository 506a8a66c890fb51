"""A hung or hostile run leaves nothing behind: no process, no file, no open descriptor in this process,
on the warm path and the cold one, and the next run works."""

import os
from pathlib import Path

import pytest

from sandbox.runner import run_code
from tests.sandbox.test_boundaries import descendants

HOSTILE = {
    "endless loop": ("while True:\n    pass", {"timeout"}),
    "fork bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", {"timeout"}),
    "sleeping thread and a busy main thread": (
        "import _thread, time\n_thread.start_new_thread(time.sleep, (600,))\nwhile True:\n    pass",
        {"timeout"},
    ),
    "sleeping grandchild": (
        "import os, time\ntry:\n    if os.fork() == 0:\n        time.sleep(600)\nexcept OSError:\n    pass\ntime.sleep(600)",
        {"timeout"},
    ),
    "threads left sleeping after the code ends": (
        "import _thread, time\nfor n in range(8):\n    _thread.start_new_thread(time.sleep, (600,))\nanswer_text = 'left'",
        {"ok"},
    ),
    "closes its result pipe and spins": ("import os\nos.close(1)\nwhile True:\n    pass", {"timeout"}),
    "memory hog": ("blocks = []\nwhile True:\n    blocks.append(bytearray(50_000_000))", {"limit_exceeded", "timeout"}),
    "output flood": ("while True:\n    print('x' * 10_000)", {"limit_exceeded"}),
}


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def tmp_entries() -> set[str]:
    return {entry.name for entry in Path("/tmp").iterdir() if entry.name.startswith("countersign")}  # noqa: S108


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("code, statuses", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_run_leaves_no_process_file_or_descriptor_behind(code, statuses, warm):
    processes, descriptors, files = descendants(os.getpid()), open_descriptors(), tmp_entries()
    result = run_code(code, tables={}, timeout_s=1, unsafe_disable_language_policy=True, warm=warm)
    assert result.status in statuses, result
    assert descendants(os.getpid()) == processes, "a process of the run is still there"
    assert open_descriptors() == descriptors
    assert tmp_entries() == files
    follow_up = run_code("answer_text = 'still here'", tables={}, warm=warm)
    assert follow_up.status == "ok" and follow_up.answer_text == "still here"
