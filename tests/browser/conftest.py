"""Headless Debian Chromium driven by Playwright. Never a downloaded browser."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",  # needed as root, as on CI
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator:
    if not CHROMIUM.exists():
        reason = f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still
    # synchronous and safe, so Django's async guard would only get in the way while it runs.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
            # Inside Playwright's context, Django's context-local connections are not the ones pytest-django
            # closes; close them here, or one outlives the test database and blocks dropping it.
            connections.close_all()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def page(browser, live_server):
    """A fresh browser tab; `page.console_errors` collects console errors and page exceptions."""
    context = browser.new_context(base_url=live_server.url)
    tab = context.new_page()
    tab.console_errors = []
    tab.on("console", lambda message: message.type == "error" and tab.console_errors.append(message.text))
    tab.on("pageerror", lambda error: tab.console_errors.append(str(error)))
    yield tab
    context.close()
