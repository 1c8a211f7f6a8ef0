"""Fixtures of the dashboard tests: fake metrics records, a headless Chromium, artifacts.

The browser is the system's Chromium driven by the system's chromedriver (Debian
packages ``chromium`` and ``chromium-driver``, installed by ``.ci/run``); tests that need
it skip, saying why, when either is missing.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest

CHROMIUM = os.environ.get("BIGLDA_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BIGLDA_CHROMEDRIVER", "/usr/bin/chromedriver")

# On a closed network Chromium's background services (updates, sync, QUIC probes) fail
# their connections en masse; these flags keep it from trying.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1500,1250",
)


@pytest.fixture(scope="session")
def artifacts_dir() -> pathlib.Path:
    """Where screenshots go: ``$BIGLDA_ARTIFACTS`` or ``tests/dashboards/artifacts``."""
    path = pathlib.Path(os.environ.get("BIGLDA_ARTIFACTS")
                        or pathlib.Path(__file__).parent / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium (Selenium) with its console log readable via ``get_log``."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"headless browser tests need {CHROMIUM} and {CHROMEDRIVER} "
                    "(apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="browser tests need selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="biglda-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def local_cluster():
    """A 2-process LocalCluster of this module's own (not the session's shared one): the page
    lists every run its scheduler has seen, and these tests register the page and log runs
    there."""
    from biglda.trainer.cluster import connect

    with connect(workers=2) as client:  # the embedded cluster `biglda train` starts
        yield client
