"""`make run`'s stack as a newcomer starts it: the printed URL serves the login page, bob logs in,
/healthz is green, and Ctrl-C leaves no process behind."""

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import psutil

from tests.conftest import ROOT


def test_the_dev_stack_starts_serves_and_stops_cleanly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({"DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}", "PORT": "0", "WORKER_CONCURRENCY": "1", "PYTHONUNBUFFERED": "1"})
    env.pop("SECRET_KEY", None)
    log = (tmp_path / "run.log").open("w+")
    stack = subprocess.Popen(
        [sys.executable, "-m", "project.devstack", "run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        url = None
        while time.monotonic() < deadline and stack.poll() is None:
            log.seek(0)
            found = re.search(r"Countersign is running at (http://127\.0\.0\.1:\d+/)", log.read())
            if found:
                url = found.group(1)
                break
            time.sleep(0.2)
        log.seek(0)
        assert url, f"no URL printed within 3 minutes:\n{log.read()}"
        printed = log.read()
        assert "bob    / countersign-bob" in printed
        children = psutil.Process(stack.pid).children(recursive=True)
        commands = [" ".join(child.cmdline()) for child in children]
        expected = ["uvicorn project.asgi:application", "project worker", "project beat"]
        if not os.environ.get("REDIS_URL"):
            expected.append("redis-server")  # embedded, because no REDIS_URL was given
        for part in expected:
            assert any(part in command for command in commands), (part, commands)

        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        login_page = browser.open(url + "login/", timeout=10).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page).group(1)
        form = urllib.parse.urlencode({"username": "bob", "password": "countersign-bob", "csrfmiddlewaretoken": token}).encode()
        inbox = browser.open(urllib.request.Request(url + "login/", data=form, headers={"Referer": url + "login/"}), timeout=10)
        assert inbox.url == url and "bob" in inbox.read().decode()
        health = json.loads(browser.open(url + "healthz", timeout=10).read())
        assert (health["status"], health["database"], health["redis"], health["workers"]) == ("ok", "ok", "ok", "ok")

        # A crashed worker is restarted with a message, and the stack keeps serving.
        (crashed,) = [c for c in psutil.Process(stack.pid).children() if "project worker" in " ".join(c.cmdline())]
        crashed.kill()
        deadline = time.monotonic() + 120
        restarted = []
        while time.monotonic() < deadline and not restarted:
            log.seek(0)
            if "The Celery worker exited with status" in log.read():
                restarted = [
                    c for c in psutil.Process(stack.pid).children() if "project worker" in " ".join(c.cmdline()) and c.pid != crashed.pid
                ]
            time.sleep(0.2)
        log.seek(0)
        assert restarted, f"no restarted worker within 2 minutes:\n{log.read()}"
        assert stack.poll() is None, "the rest of the stack kept running"
        children = psutil.Process(stack.pid).children(recursive=True)
        while time.monotonic() < deadline:
            try:
                health = json.loads(browser.open(url + "healthz", timeout=10).read())
            except urllib.error.HTTPError as unhealthy:  # 503 while the new worker starts
                health = json.loads(unhealthy.read())
            if health["workers"] == "ok":
                break
            time.sleep(0.5)
        assert health["workers"] == "ok", health
    finally:
        os.kill(stack.pid, signal.SIGINT)
        stack.wait(timeout=60)
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE], (
        "Ctrl-C stops every process it started"
    )
