"""The warm path: a template process forks a fresh walled process per run. Nothing survives a run, a dead
template is replaced, a forked worker gets its own, and when the kernel refuses the wall no code runs."""

import json
import os
import subprocess
import sys

from sandbox import runner
from sandbox.runner import run_code


def test_warm_and_cold_runs_are_the_same_wall():
    for warm in (True, False):
        result = run_code("answer_text = 'walled'", tables={}, warm=warm)
        assert result.status == "ok" and result.isolation["template"] is warm
        assert result.isolation["pid"] == 1 and result.isolation["seccomp"] is True


def test_no_state_survives_from_one_warm_run_to_the_next():
    first = run_code(
        "import json\njson.leftover = 'from the first run'\nanswer_text = json.leftover", tables={}, unsafe_disable_language_policy=True
    )
    second = run_code("import json\nanswer_text = str(getattr(json, 'leftover', 'clean'))", tables={}, unsafe_disable_language_policy=True)
    assert first.answer_text == "from the first run"
    assert second.answer_text == "clean"


def test_a_dead_template_is_replaced_on_the_next_run():
    template = runner.template()
    template.process.kill()
    template.process.wait()
    assert run_code("answer_text = 'after'", tables={}).answer_text == "after"  # cold while the new one starts
    assert runner.warm_up()
    assert runner.template() is not template
    assert run_code("answer_text = 'warm again'", tables={}).isolation["template"] is True


def test_a_forked_worker_gets_its_own_template_and_leaves_the_parents_alone():
    parent_template = runner.template()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # like a Celery prefork child
        status = 1
        try:
            os.close(read_end)
            runner.warm_up()
            result = run_code("answer_text = 'from the fork'", tables={})
            own = runner.template()
            os.write(write_end, json.dumps([result.answer_text, result.isolation.get("template"), own.owner == os.getpid()]).encode())
            runner.stop_template()
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    report = json.loads(os.read(read_end, 4096))
    os.close(read_end)
    assert os.waitpid(pid, 0)[1] == 0
    assert report == ["from the fork", True, True]
    assert parent_template.alive() and runner.template() is parent_template


def test_run_code_refuses_when_the_wall_is_unavailable(monkeypatch):
    monkeypatch.setattr(runner, "unavailable_reason", lambda: "the kernel refused new namespaces: EPERM")
    result = run_code("answer_text = 'ran'", tables={})
    assert result.status == "error" and result.answer_text == ""
    assert "Code plans are unavailable: the kernel refused new namespaces" in result.error


# Starts the child in a user namespace (uids 0-65535 mapped, as on the host) whose limit on nested user
# namespaces is 0, so the kernel refuses the child's own namespaces.
NO_NESTED_NAMESPACES = """
import ctypes, os, sys
ready_read, ready_write = os.pipe()
mapped_read, mapped_write = os.pipe()
pid = os.fork()
if pid == 0:
    ctypes.CDLL(None).unshare(0x10000000)
    os.write(ready_write, b"x")
    os.read(mapped_read, 1)
    open("/proc/sys/user/max_user_namespaces", "w").write("0")
    os.execv(sys.executable, [sys.executable, "-I", "-S", "-B", sys.argv[1]])
os.read(ready_read, 1)
for name in ("uid_map", "gid_map"):
    open(f"/proc/{pid}/{name}", "w").write("0 0 65536")
os.write(mapped_write, b"x")
os.waitpid(pid, 0)
"""


def test_the_child_refuses_to_run_when_the_kernel_refuses_a_namespace():
    payload = runner._payload("answer_text = 'ran'", {}, "", 5, None, None, False)
    completed = subprocess.run(
        [sys.executable, "-c", NO_NESTED_NAMESPACES, str(runner.CHILD)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    result = json.loads(completed.stdout)
    assert result["status"] == "error" and "answer_text" not in result
    assert "Code plans are unavailable: the kernel refused new namespaces" in result["error"]


def test_unavailable_reason_is_none_on_this_machine():
    assert runner.unavailable_reason() is None
