"""The scheduler plugin on a LocalCluster and on an external ``dask scheduler``."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import cloudpickle
import pytest
from dash_helpers import fake_records, wait_for

from dashboards.panels import PANELS
from dashboards.plugin import PAGE, TOPIC, register

TITLE = "<title>biglda: training</title>"
#: The entry of Dask's navigation bar (relative, like Dask's own: it follows a prefix).
NAV_LINK = f'<a href="{PAGE}">'


# The helpers below run on the scheduler, which cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read().decode("utf-8", "replace")


def _plugin_state(dask_scheduler):
    """Runs on the scheduler: plugin names and the page's series lengths per run."""
    from dashboards.plugin import DashboardPlugin

    mine = [p for p in dask_scheduler.plugins.values() if isinstance(p, DashboardPlugin)]
    runs = mine[0].runs.runs if mine else {}
    return {
        "plugins": len(mine),
        "series": {rid: len(r.records) for rid, r in runs.items()},
        "scheduler_events": len(dask_scheduler.get_events(TOPIC)),
    }


def _log_on_scheduler(records, dask_scheduler=None):
    """Runs on the scheduler: publish many records in one round trip."""
    for r in records:
        dask_scheduler.log_event("biglda", r)


def test_register_on_local_cluster_twice_is_harmless(local_cluster):
    client = local_cluster
    url = register(client)
    assert register(client) == url
    assert url.endswith(f"/{PAGE}") and url.startswith("http://127.0.0.1:")
    status, body = _get(url)
    assert status == 200 and TITLE in body
    # Dask's own pages still work, and their navigation bar links to the page (once)
    for dask_page in ("status", "workers"):
        status, body = _get(url[: -len(PAGE)] + dask_page)
        assert status == 200 and body.count(NAV_LINK) == 1, dask_page

    recs = fake_records("local-1", 1100, top_words_every=100)
    client.run_on_scheduler(_log_on_scheduler, recs)
    state = client.run_on_scheduler(_plugin_state)
    assert state["plugins"] == 1
    # the scheduler keeps 1,000 events per topic; the page keeps the whole run
    assert state["series"]["local-1"] == 1100
    assert state["scheduler_events"] <= 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _external_cluster(tmp: pathlib.Path):
    """``dask scheduler`` + ``dask worker`` subprocesses on loopback, random free ports."""
    port, dash = _free_port(), _free_port()
    dask_cli = [os.path.join(os.path.dirname(sys.executable), "dask")]
    if not os.access(dask_cli[0], os.X_OK):
        pytest.skip("the dask command is not installed next to this Python")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    logs = [open(tmp / "scheduler.log", "w"), open(tmp / "worker.log", "w")]  # noqa: SIM115
    procs = []
    try:
        procs.append(subprocess.Popen(
            [*dask_cli, "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--dashboard-address", f"127.0.0.1:{dash}", "--no-show"],
            stdout=logs[0], stderr=subprocess.STDOUT, env=env))
        address = f"tcp://127.0.0.1:{port}"
        procs.append(subprocess.Popen(
            [*dask_cli, "worker", address, "--nthreads", "1", "--nworkers", "1",
             "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"],
            stdout=logs[1], stderr=subprocess.STDOUT, env=env))
        yield address, dash
    finally:
        for p in reversed(procs):  # worker first, then the scheduler
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in logs:
            f.close()


def test_register_on_external_scheduler(tmp_path):
    from distributed import Client

    with _external_cluster(tmp_path) as (address, dash_port):
        client = wait_for(lambda: _try_connect(Client, address), 30, "the external scheduler")
        try:
            client.wait_for_workers(1, timeout=30)
            # records sent before the page exists are picked up from the scheduler's log
            early = fake_records("ext-early", 5)
            for r in early:
                client.log_event("biglda", r)
            url = register(client)
            assert url == f"http://127.0.0.1:{dash_port}/{PAGE}"
            assert register(client) == url
            status, body = _get(url)
            assert status == 200 and TITLE in body
            assert NAV_LINK in _get(url[: -len(PAGE)] + "status")[1]
            for r in fake_records("ext-2", 12):
                client.log_event("biglda", r)
            state = wait_for(
                lambda: (s := client.run_on_scheduler(_plugin_state))["series"].get("ext-2") == 12
                and s, 10, "the plugin to receive 12 records")
            assert state["plugins"] == 1
            assert state["series"] == {"ext-early": 5, "ext-2": 12}
            assert client.submit(sum, [1, 2]).result(timeout=30) == 3  # the worker is alive
        finally:
            client.close()


def _try_connect(client_cls, address):
    try:
        return client_cls(address, timeout=2)
    except OSError:
        time.sleep(0.3)
        return None


def test_page_url_reads_dashboard_link():
    from dashboards.plugin import page_url

    class Fake:
        dashboard_link = "http://10.0.0.1:8787/status"

    assert page_url(Fake()) == "http://10.0.0.1:8787/biglda"
    assert page_url(Fake(), "/dask/biglda") == "http://10.0.0.1:8787/dask/biglda"
    Fake.dashboard_link = "http://h:1/prefix/status"
    assert page_url(Fake()) == "http://h:1/prefix/biglda"


def test_page_under_a_dashboard_prefix():
    """``dask scheduler --dashboard-prefix /dask``: the page moves under the prefix too."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0",
                      scheduler_kwargs={"http_prefix": "/dask"}) as cluster, \
            Client(cluster) as client:
        url = register(client)
        assert url.endswith("/dask/biglda")
        status, body = _get(url)
        assert status == 200 and TITLE in body
        # /dask/status links "biglda", which the browser resolves to /dask/biglda
        assert NAV_LINK in _get(url[: -len(PAGE)] + "status")[1]
    assert json.loads(json.dumps(fake_records("x", 2)))  # records are JSON-serializable


@pytest.mark.browser
def test_page_lists_runs_and_switches_between_them(local_cluster, browser, artifacts_dir):
    from dash_helpers import (
        JS_DEEP_TEXT,
        JS_PLOT_TITLES,
        JS_SOURCE_DATA,
        JS_TABLE_ROWS,
        console_errors,
        reset_page,
    )

    client = local_cluster
    url = register(client)
    origin = "/".join(url.split("/")[:3])
    n_topics = 40  # more than the table shows at once: it must scroll to the last
    client.run_on_scheduler(_log_on_scheduler,
                            fake_records("multi-a", 9, n_topics=n_topics, sampler="cgs"))
    multi_b = fake_records("multi-b", 6)
    client.run_on_scheduler(_log_on_scheduler, multi_b[:4])  # start + 3 iterations: running
    reset_page(browser)
    browser.get(url)

    def n_points():
        data = browser.execute_script(JS_SOURCE_DATA, "biglda-history")
        return data and len(data["iteration"])

    # the newest run is shown; the selector lists it first, then the earlier ones
    wait_for(lambda: n_points() == 3, 20, "the newest run's 3 points")
    assert browser.execute_script(JS_PLOT_TITLES) == [p.title for p in PANELS]
    options = browser.execute_script(
        "return Bokeh.documents[0].get_model_by_name('biglda-run-select').options"
        ".map(o => Array.isArray(o) ? o : [o, o])")
    assert [v for v, _ in options[:2]] == ["multi-b", "multi-a"]
    # the selector names each run by its output and corpus, as the user sees it
    shown = browser.execute_script(JS_DEEP_TEXT, "select")
    assert "multi-a/model.zarr <- multi-a/corpus.zarr" in shown
    assert "multi-b/model.zarr <- multi-b/corpus.zarr | running" in shown
    # picking an earlier run in the browser redraws from the scheduler's series
    browser.execute_script(
        "Bokeh.documents[0].get_model_by_name('biglda-run-select').value = 'multi-a'")
    wait_for(lambda: n_points() == 9, 20, "the earlier run's 9 points")
    # multi-a is exact Gibbs: the grid is laid out again without the MH panel (no hole)
    wait_for(lambda: browser.execute_script(JS_PLOT_TITLES)
             == [p.title for p in PANELS if not p.title.startswith("Metropolis")], 20,
             "the grid without the Metropolis-Hastings panel")
    # every topic is in the table: the last one is reached by scrolling it
    table = wait_for(lambda: (t := browser.execute_script(JS_TABLE_ROWS, False))
                     and len(t["rows"]) > 1 and t, 20, "the top-words table's rows")
    assert table["rows"][0].startswith("0") and table["scroll_height"] > table["height"]
    table = wait_for(lambda: (t := browser.execute_script(JS_TABLE_ROWS, True))
                     and any(r.startswith(f"{n_topics - 1}") for r in t["rows"]) and t, 20,
                     f"topic {n_topics - 1} after scrolling the table")
    assert f"t{n_topics - 1}w0" in " ".join(table["rows"])
    # and a record of the running job does not pull the page away from the chosen run
    client.run_on_scheduler(_log_on_scheduler, multi_b[4:5])
    time.sleep(1.2)
    assert n_points() == 9
    browser.save_screenshot(str(artifacts_dir / "page-earlier-run.png"))
    assert console_errors(browser, origin) == []


@pytest.mark.browser
def test_dask_status_page_links_to_the_page(local_cluster, browser, artifacts_dir):
    from dash_helpers import console_errors, reset_page
    from selenium.webdriver.common.by import By

    url = register(local_cluster)
    origin = "/".join(url.split("/")[:3])
    reset_page(browser)
    browser.get(url[: -len(PAGE)] + "status")
    assert browser.title == "Dask Diagnostic UI"
    wait_for(lambda: browser.execute_script(
        "return window.Bokeh && Bokeh.documents.length > 0"), 20, "Dask's status page")
    link = browser.find_element(By.CSS_SELECTOR, f"#myTopnav a[href='{PAGE}']")
    assert link.text.lower() == "biglda"
    browser.save_screenshot(str(artifacts_dir / "dask-status-link.png"))
    link.click()
    wait_for(lambda: browser.current_url == url, 20, "the link to open /biglda")
    wait_for(lambda: browser.title == "biglda: training", 20, "the biglda page to load")
    # the biglda page carries the same bar, with its own entry and the way back
    for href in (PAGE, "status"):
        assert browser.find_element(By.CSS_SELECTOR, f"#myTopnav a[href='{href}']").is_displayed()
    assert console_errors(browser, origin) == []
