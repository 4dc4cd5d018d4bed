"""Headless Chromium (Debian's package) on a viewer page: its DOM after the script ran, or a screenshot.

Why a real browser: whether every question is on the page, what a filter leaves and whether a model's
markup stays text are decided by the page's script, so the tests (tests/unit/eval/test_view_browser.py)
and the README's screenshots (research/view_screenshots.py) look at the page as Chromium renders it.
Each call uses a fresh profile folder and switches off every background connection Chromium would make.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--disable-extensions")  # fmt: skip


def chromium() -> str | None:
    """The Chromium binary on PATH (Debian: ``apt-get install chromium``), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(url: str, *extra: str, timeout_s: float = 60.0) -> str:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed: apt-get install -y chromium (.ci/run installs it)")
    with tempfile.TemporaryDirectory(prefix="view-chromium-") as profile:
        done = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *extra, url], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode} on {url}: {done.stderr.strip()[-500:]}")
    return done.stdout


def dump_dom(page: Path, fragment: str = "") -> str:
    """The page's DOM as HTML once its script has run, opened at ``#fragment`` (the viewer's state)."""
    return _run(page.resolve().as_uri() + (f"#{fragment}" if fragment else ""), "--dump-dom")


def screenshot(page: Path, out: Path, fragment: str = "", width: int = 1400, height: int = 1400) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(page.resolve().as_uri() + (f"#{fragment}" if fragment else ""), f"--screenshot={out.resolve()}", f"--window-size={width},{height}")
    return out
