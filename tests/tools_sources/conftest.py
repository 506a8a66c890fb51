"""Real MCP servers for the tool source tests: mcp-server-time and the test desk (tests/fakes/mcp_server.py)
over stdio, and the desk over Streamable HTTP under uvicorn on 127.0.0.1."""

import subprocess
import sys

import pytest
from django.contrib.auth.models import User

from project.devstack import free_port, wait_for_port
from tests.conftest import ROOT, make_user, stop_process
from tools import services
from tools.registry import registry

DESK = f"{sys.executable} -m tests.fakes.mcp_server"
TIME = f"{sys.executable} -m mcp_server_time"
DESK_TOKEN = ("X-Desk-Token", "s3cret-desk-token")


@pytest.fixture
def admin(db) -> User:
    user = make_user("root", None)
    user.is_superuser = user.is_staff = True
    user.save()
    return user


def add_source(name: str, *, trusted: bool, **options):
    source, report = services.tool_source_create(actor=None, name=name, cwd=str(ROOT), trusted=trusted, **options)
    registry.invalidate()
    return source, report


@pytest.fixture
def desk(db):
    """The test desk over stdio, trusted."""
    return add_source("desk", stdio=DESK, trusted=True)[0]


@pytest.fixture(scope="session")
def desk_http_url():
    port = free_port()
    env = {"FAKE_MCP_REQUIRE_HEADER": ":".join(DESK_TOKEN), "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen([sys.executable, "-m", "tests.fakes.mcp_server", "--http", str(port)], cwd=ROOT, env=env)
    wait_for_port(port, timeout=30, process=process)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_process(process)
