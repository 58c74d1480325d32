"""A headless Chromium for looking at a built viewer: its browser test and its screenshots.

The browser is the system's Chromium (Debian: `apt-get install chromium chromium-driver`),
driven through selenium (the `test` extra). Pages are opened as file:// URLs, the way a
user opens a copied site. Every request a page makes is recorded (Chrome's performance
log, `Network.requestWillBeSent`), and every request to another machine is blocked
(`Network.setBlockedURLs`), so a check can assert that the viewer fetched nothing from
the network rather than hope that it did not.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from cuset.errors import CusetError

CHROMIUM_NAMES = ("chromium", "chromium-browser")
DRIVER_NAMES = ("chromedriver",)
# Schemes that reach another machine; a viewer page must use none of them.
BLOCKED_URLS = ("http://*", "https://*", "ws://*", "wss://*", "ftp://*")
INSTALL_HINT = "install it with `apt-get install chromium chromium-driver` (Debian/Ubuntu, as root)"


class BrowserUnavailable(CusetError, RuntimeError):
    """No headless Chromium can be started here; the message says what is missing and how to get it."""


def _which(names: tuple[str, ...], env: str) -> str | None:
    override = os.environ.get(env)
    if override:
        return override if Path(override).is_file() else None
    return next((p for p in map(shutil.which, names) if p), None)


def find_chromium() -> str | None:
    """The Chromium binary ($CUSET_CHROMIUM, else chromium on PATH); None when there is none."""
    return _which(CHROMIUM_NAMES, "CUSET_CHROMIUM")


def find_chromedriver() -> str | None:
    """The chromedriver binary ($CUSET_CHROMEDRIVER, else chromedriver on PATH)."""
    return _which(DRIVER_NAMES, "CUSET_CHROMEDRIVER")


@dataclass
class Browser:
    """A started headless Chromium (`driver`: selenium's WebDriver) and the requests it made."""

    driver: object
    _events: list[dict]

    def open(self, page: Path, fragment: str = "") -> None:
        """Load a local file (a fragment such as "status=wrong" goes after '#')."""
        self.driver.get(Path(page).resolve().as_uri() + (f"#{fragment}" if fragment else ""))

    def _network_events(self) -> list[dict]:
        for entry in self.driver.get_log("performance"):   # each entry is returned once: keep them
            message = json.loads(entry["message"])["message"]
            if message.get("method", "").startswith("Network."):
                self._events.append(message)
        return self._events

    def requested_urls(self) -> list[str]:
        """Every URL the pages asked for since the browser started, in order (refused ones too)."""
        return [e["params"]["request"]["url"] for e in self._network_events()
                if e["method"] == "Network.requestWillBeSent"]

    def refused(self) -> dict[str, str]:
        """URL -> why Chromium refused to load it (e.g. "csp", "inspector" for BLOCKED_URLS)."""
        urls = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in self._network_events()
                if e["method"] == "Network.requestWillBeSent"}
        return {urls.get(e["params"]["requestId"], "?"): e["params"].get("blockedReason") or e["params"]["errorText"]
                for e in self._events if e["method"] == "Network.loadingFailed"}

    def screenshot(self, out: Path, width: int, height: int | None = None) -> Path:
        """A PNG of the current page, `width` CSS pixels wide and its full height (or `height`)."""
        full = self.driver.execute_script(
            "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
        self.driver.set_window_size(width, int(height or full))
        out.parent.mkdir(parents=True, exist_ok=True)
        if not self.driver.save_screenshot(str(out)):
            raise BrowserUnavailable(f"Chromium could not write the screenshot {out}")
        return out


@contextmanager
def headless_chromium(width: int = 1280, height: int = 900) -> Iterator[Browser]:
    """A headless Chromium with the network blocked and requests recorded; quit on exit."""
    chromium, driver_path = find_chromium(), find_chromedriver()
    if chromium is None:
        raise BrowserUnavailable(f"no Chromium binary found ({', '.join(CHROMIUM_NAMES)} on PATH or "
                                 f"$CUSET_CHROMIUM); {INSTALL_HINT}")
    if driver_path is None:
        raise BrowserUnavailable(f"Chromium is at {chromium} but chromedriver is not on PATH; {INSTALL_HINT}")
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise BrowserUnavailable("selenium is not installed: pip install -e '.[test]' (or pip install selenium)") from None
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars", f"--window-size={width},{height}"):
        options.add_argument(arg)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        options.add_argument("--no-sandbox")   # Chromium refuses to start its sandbox as root
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    except WebDriverException as e:
        raise BrowserUnavailable(f"could not start {chromium} through {driver_path}: {e.msg or e}") from None
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": list(BLOCKED_URLS)})
        yield Browser(driver, [])
    finally:
        driver.quit()
