"""Debian's Chromium, driven by Playwright (sync API): the one way tests (and ``make screenshots``) get a browser.

The binary is ``$GATEHOUSE_CHROMIUM`` or ``/usr/bin/chromium`` (``make test`` installs Debian's ``chromium`` package
when it is missing); never Playwright's own download (``playwright install`` cannot reach its CDN here). Without a
browser a test is skipped with the reason, except under ``CI`` (set), where that is a failure, as for PostgreSQL
(tests/support/postgres.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM_ENV = "GATEHOUSE_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> str:
    """The Chromium binary to drive, or skip (fail under CI) with why there is none."""
    wanted = os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM
    found = shutil.which(wanted)
    if found is None:
        reason = (f"no Chromium at {wanted!r} (set {CHROMIUM_ENV} or install Debian's chromium package: `make chromium`); "
                  "the inbox's browser tests need it")
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run them")
        pytest.skip(reason)
    return found


@contextmanager
def chromium() -> Iterator[Browser]:
    """One headless Chromium, closed afterwards."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the test extra installs it
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed (pip install -e '.[test]')")
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()
