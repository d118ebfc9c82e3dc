"""Opening the pages attnexp writes in a real browser (Debian's chromium, headless), to check what
a user would see: that a page renders, and that nothing from the data became markup or ran."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); "
                                                             ".ci/run installs it")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Markup that, if it ever became part of a page, marks the body (the check needs no alert dialog).
PAYLOAD = "<img src=x onerror=\"document.body.dataset.pwned='yes'\">"


def dump_dom(page: Path, fragment: str = "") -> str:
    """The page's DOM after its scripts ran (the URL fragment, e.g. `view=text&token=0`, opens a view)."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory(prefix="attnexp-chromium-", ignore_cleanup_errors=True) as profile:
        return open_page(url, "--dump-dom", Path(profile))


def open_page(url: str, action: str, profile: Path, size: str = "900,900", wait_ms: int = 10000) -> str:
    """Chromium's `action` on the page (`--dump-dom`: its DOM printed; `--screenshot=FILE`), with its profile
    in `profile` and `wait_ms` of virtual time, so pages that inflate their data asynchronously get to draw."""
    flags = [*FLAGS, f"--window-size={size}", f"--virtual-time-budget={wait_ms}", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, action, url], capture_output=True, text=True, timeout=120).stdout


def injected(dom: str) -> bool:
    """Whether the payload ran or became an element."""
    return 'data-pwned="yes"' in dom or "<img src=\"x\"" in dom or "<img src=x" in dom
