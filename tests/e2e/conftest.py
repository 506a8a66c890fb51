"""Real-browser tests: Playwright drives the system Chromium against uvicorn serving the test database."""

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in this thread; the tests' own ORM calls are still plain
# synchronous code, so Django's async-safety guard would refuse them without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed: `apt-get install chromium` (.ci/run does this).")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def new_page(browser, asgi_server):
    contexts = []

    def make(username: str, password: str):
        context = browser.new_context(base_url=asgi_server, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(asgi_server + "/")
        return page

    yield make
    for context in contexts:
        context.close()
