"""Bait for the sandbox tests: things outside the sandbox that an escape would reach, each with an
observable that shows whether it was reached.

- a secret file, world-readable in a world-traversable folder (nobody on the host could read it), and the
  same secret held open by this process on an inheritable descriptor and set in its environment;
- a marker path in a world-writable folder that an escape would create;
- a victim process that an escape would signal or kill;
- a listening TCP socket on 127.0.0.1 that an escape would connect to.
"""

import os
import secrets
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox import runner


@dataclass
class Bait:
    folder: Path
    secret: str
    secret_path: Path
    secret_descriptor: int
    marker: Path
    victim: subprocess.Popen
    listener: socket.socket

    def fill(self, code: str) -> str:
        """The escape's code with the real paths, pids and ports in place of the placeholders."""
        replacements = {
            "SECRET_PATH": str(self.secret_path),
            "SECRET_FD": str(self.secret_descriptor),
            "MARKER": str(self.marker),
            "VICTIM": str(self.victim.pid),
            "PARENT": str(os.getpid()),
            "PORT": str(self.listener.getsockname()[1]),
        }
        for placeholder, value in replacements.items():
            code = code.replace(placeholder, value)
        return code

    def untouched(self, result) -> list[str]:
        """What the run reached outside the sandbox; an empty list means it was contained."""
        reached = []
        if self.marker.exists():
            reached.append(f"created {self.marker}")
        text = " ".join([result.answer_text, result.stdout, result.error, repr(result.effects)])
        if self.secret in text:
            reached.append("read the secret")
        if self.victim.poll() is not None:
            reached.append("killed the victim process")
        try:
            connection, _ = self.listener.accept()
            connection.close()
            reached.append("connected to the listening socket")
        except BlockingIOError:
            pass
        return reached


@pytest.fixture(scope="session", autouse=True)
def sandbox_available():
    reason = runner.unavailable_reason()
    assert reason is None, f"the sandbox tests need a kernel that allows the wall: {reason}"
    assert runner.warm_up(), "the template process did not start"


@pytest.fixture
def bait():
    folder = Path(f"/tmp/countersign-bait-{secrets.token_hex(6)}")  # noqa: S108 (deliberately public)
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    secret = f"countersign-secret-{secrets.token_hex(8)}"
    secret_path = folder / "secret.txt"
    secret_path.write_text(secret)
    secret_path.chmod(0o644)
    descriptor = os.open(secret_path, os.O_RDONLY)
    os.set_inheritable(descriptor, True)
    os.environ["COUNTERSIGN_TEST_SECRET"] = secret
    victim = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])  # waits for a signal
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    yield Bait(folder, secret, secret_path, descriptor, folder / "escaped", victim, listener)
    listener.close()
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    os.environ.pop("COUNTERSIGN_TEST_SECRET", None)
    os.close(descriptor)
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
