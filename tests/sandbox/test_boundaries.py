"""The edges of a run, each shown on its own with the language policy off: it cannot see or signal a
process outside its namespace, cannot open any file, cannot reach any socket, and holds no descriptor but
its pipes. The last is also checked from outside, in /proc, while the run is alive."""

import json
import os
import threading
import time
from pathlib import Path

from sandbox.runner import run_code


def run_unpolicied(code: str, **options):
    return run_code(code, tables={}, unsafe_disable_language_policy=True, **options)


def test_a_run_is_pid_one_of_its_own_namespace_as_nobody_without_capabilities():
    result = run_unpolicied("import os\nanswer_text = repr((os.getpid(), os.getppid(), os.getuid(), os.getgid()))")
    assert result.answer_text == repr((1, 0, 65534, 65534)), "PID 1, no visible parent, nobody"
    assert result.isolation["capabilities_empty"] is True and result.isolation["no_new_privs"] is True
    assert set(result.isolation["namespaces"]) >= {"user", "pid", "mount", "ipc", "uts", "network"}


def test_a_run_cannot_see_or_signal_a_process_outside_its_namespace(bait):
    code = bait.fill(
        """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
outcomes = {}
for name, call in {
    "kill": lambda: os.kill(VICTIM, 9),
    "probe": lambda: os.kill(VICTIM, 0),
    "kill the parent": lambda: os.kill(PARENT, 9),
    "tgkill": lambda: libc.syscall(234, VICTIM, VICTIM, 9) or ctypes.get_errno(),
    "pidfd": lambda: libc.syscall(434, VICTIM, 0) or ctypes.get_errno(),
    "list /proc": lambda: os.listdir("/proc"),
}.items():
    try:
        outcomes[name] = repr(call())
    except OSError as error:
        outcomes[name] = error.errno
answer_text = repr(outcomes)
"""
    )
    result = run_unpolicied(code)
    assert result.status == "ok", result
    outcomes = eval(result.answer_text)  # noqa: S307 (a dict of ints and reprs this test wrote)
    assert outcomes["kill"] == outcomes["probe"] == outcomes["kill the parent"] == outcomes["list /proc"] == 1
    assert outcomes["tgkill"] == outcomes["pidfd"] == "-1"
    assert bait.victim.poll() is None, "the victim is still alive"


def test_a_run_cannot_open_any_file(bait):
    paths = ["/", "/etc/passwd", "/proc/self/status", "/dev/null", "/tmp", ".", str(bait.secret_path), str(bait.marker)]
    code = f"""
import os
refused = []
for path in {paths!r}:
    for flags in (os.O_RDONLY, os.O_PATH, os.O_DIRECTORY, os.O_WRONLY | os.O_CREAT):
        try:
            os.open(path, flags)
        except OSError:
            refused.append(path)
answer_text = str(len(refused))
"""
    result = run_unpolicied(code)
    assert result.status == "ok", result
    assert result.answer_text == str(len(paths) * 4)
    assert bait.untouched(result) == []


def test_a_run_cannot_reach_any_socket(bait):
    code = bait.fill(
        """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
made = [libc.socket(family, kind, 0) for family, kind in ((2, 1), (2, 2), (10, 1), (1, 1), (1, 2), (16, 3))]
address = struct.pack("<H", 2) + struct.pack("!H", PORT) + bytes([127, 0, 0, 1]) + bytes(8)  # sockaddr_in
connected = libc.connect(max(made), address, 16)
answer_text = repr((made, connected))
"""
    )
    result = run_unpolicied(code)
    assert result.status == "ok", result
    made, connected = eval(result.answer_text)  # noqa: S307 (a tuple of ints)
    assert made == [-1] * 6 and connected == -1
    assert bait.untouched(result) == [], "nothing reached the listening socket"


def descendants(root: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(status.split("PPid:")[1].split()[0])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def status_of(pid: int) -> dict:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines if ":" in line}


def seen_from_outside_while_running(**options) -> dict:
    """Start a run that spins, find its PID 1 in /proc (a descendant under seccomp), describe it."""
    outcome = {}
    runner_thread = threading.Thread(target=lambda: outcome.update(result=run_unpolicied("while True:\n    pass", timeout_s=3, **options)))
    runner_thread.start()
    deadline, seen = time.monotonic() + 3, None
    while seen is None and time.monotonic() < deadline:
        for pid in descendants(os.getpid()):
            try:
                status = status_of(pid)
                if status.get("Seccomp") == "2" and status["NSpid"].split()[-1] == "1":
                    seen = {
                        "status": status,
                        "fds": {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")},
                        "namespaces": {ns: os.readlink(f"/proc/{pid}/ns/{ns}") for ns in ("user", "pid", "mnt", "net", "ipc", "uts")},
                    }
                    break
            except (OSError, KeyError, IndexError):
                continue
    runner_thread.join()
    assert seen is not None, "the run's PID 1 was not found while it ran"
    assert outcome["result"].status == "timeout"
    return seen


def test_a_run_inherits_no_descriptor_but_its_pipes(bait):
    for warm in (True, False):
        seen = seen_from_outside_while_running(warm=warm)
        assert sorted(seen["fds"]) == ["0", "1", "2"], seen["fds"]
        assert all(target.startswith("pipe:") for target in seen["fds"].values()), seen["fds"]


def test_from_outside_the_run_is_nobody_without_capabilities_in_its_own_namespaces():
    seen = seen_from_outside_while_running()
    status = seen["status"]
    assert status["Uid"].split() == ["65534"] * 4 and status["Gid"].split() == ["65534"] * 4
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == int(status["CapBnd"], 16) == int(status["CapAmb"], 16) == 0
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    ours = {ns: os.readlink(f"/proc/self/ns/{ns}") for ns in seen["namespaces"]}
    assert all(seen["namespaces"][ns] != ours[ns] for ns in ours), "every namespace is its own"


def test_the_result_pipe_carries_only_json_the_parent_checks():
    result = run_unpolicied("import os\nos.write(1, b'not json')\nos._exit(0)")
    assert result.status == "error" and "without a result" in result.error
    assert json.dumps(result.as_dict())
