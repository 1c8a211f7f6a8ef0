"""A real training run on the demo corpus, watched through ``/biglda`` in headless Chromium.

One run (module fixture) feeds two tests: the browser test looks at the page while the
run is going and after it ends; the records test checks what the trainer published
against the model it saved.
"""

from __future__ import annotations

import itertools
import json
import math
import pathlib
import threading

import pytest
from dash_helpers import JS_SOURCE_DATA, console_errors, reset_page, wait_for

from dashboards.plugin import register

DEMO = pathlib.Path(__file__).parents[2] / "datasets" / "demo" / "debian-sample.tsv.gz"
N_TOPICS = 8
ITERATIONS = 24
#: Contract fields of an iteration record (docs/contracts.md).
ITERATION_FIELDS = {
    "type", "run_id", "iteration", "n_iterations", "elapsed", "ll_per_token", "tokens_per_s",
    "tokens_per_s_per_worker", "clocks", "clock_spread", "bytes_pushed", "bytes_pulled",
    "bytes_early_sent", "bytes_early_received", "accept_rate", "eta_s", "ps_overhead",
    "top_words",
}


class LiveRun:
    """A training run on a background thread; ``records`` fills as the trainer emits."""

    def __init__(self, client, corpus: str, out: str) -> None:
        from biglda.model.training import train_to_store as train

        self.records: list[dict] = []
        self.error: BaseException | None = None
        self.out = out
        self.url = register(client)

        def target() -> None:
            try:
                # slow_shards (a debug knob of the trainer) stretches the run to ~10 s so
                # the browser sees it while it is going.
                train(corpus, out, n_topics=N_TOPICS, iterations=ITERATIONS, sampler="lightlda",
                      scheduler=client, seed=1, checkpoint_every=0, slow_shards={0: 0.2},
                      on_record=self.records.append)
            except BaseException as exc:  # re-raised in the test thread by join()
                self.error = exc

        self.thread = threading.Thread(target=target, name="biglda-train", daemon=True)
        self.thread.start()

    def iterations(self) -> list[dict]:
        return [r for r in list(self.records) if r.get("type") == "iteration"]

    def join(self, timeout: float = 180) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"training did not finish in {timeout} s"
        if self.error is not None:
            raise self.error


@pytest.fixture(scope="module")
def demo_corpus(tmp_path_factory) -> str:
    from biglda.corpus.ingest import ingest

    if not DEMO.exists():
        pytest.fail(f"the shipped demo corpus {DEMO} is missing")
    out = str(tmp_path_factory.mktemp("demo") / "corpus.zarr")
    ingest(str(DEMO), out, format="tsv")
    return out


@pytest.fixture(scope="module")
def live_run(local_cluster, demo_corpus, tmp_path_factory) -> LiveRun:
    run = LiveRun(local_cluster, demo_corpus,
                  str(tmp_path_factory.mktemp("live") / "model.zarr"))
    yield run
    run.thread.join(180)


@pytest.mark.browser
def test_page_follows_real_training(live_run, demo_corpus, browser, artifacts_dir):
    from biglda.corpus import Corpus

    reset_page(browser)
    origin = "/".join(live_run.url.split("/")[:3])
    browser.get(live_run.url)
    assert browser.title == "biglda: training"

    def page(name: str):
        return browser.execute_script(JS_SOURCE_DATA, name)

    # While it runs: the page has a prefix of the trainer's records, value for value.
    seen = wait_for(lambda: (h := page("biglda-history")) and len(h["iteration"]) >= 3 and h,
                    120, "three iterations on the page")
    emitted = live_run.iterations()
    mid_run = live_run.thread.is_alive()
    n = len(seen["iteration"])
    assert n <= len(emitted)
    assert seen["iteration"] == [r["iteration"] for r in emitted[:n]]
    assert all(math.isclose(a, r["ll_per_token"])
               for a, r in zip(seen["ll_per_token"], emitted[:n], strict=True))
    if mid_run:
        browser.save_screenshot(str(artifacts_dir / "live-page-running.png"))

    live_run.join()
    # After the end record: one point per iteration, and the header says so.
    final = wait_for(lambda: (h := page("biglda-history")) and len(h["iteration"]) == ITERATIONS
                     and h, 20, f"{ITERATIONS} points on the page")
    assert final["iteration"] == list(range(1, ITERATIONS + 1))
    status = wait_for(lambda: browser.execute_script(
        "const d = Bokeh.documents[0].get_model_by_name('biglda-status');"
        "return d && d.text.includes(\"data-status='ok'\") ? d.text : null;"),
        20, "the header to report the run as finished")
    assert f"data-iterations='{ITERATIONS}'" in status
    # the run selector names the run by where it writes and what it reads
    labels = browser.execute_script(
        "return Bokeh.documents[0].get_model_by_name('biglda-run-select').options"
        ".map(o => Array.isArray(o) ? o[1] : o)")
    tail = "/".join(pathlib.Path(live_run.out).parts[-2:])
    corpus_tail = "/".join(pathlib.Path(demo_corpus).parts[-2:])
    assert labels[0].startswith(f"{tail} <- {corpus_tail} | ok | "), labels

    # The top-words table shows words of the corpus's vocabulary, one row per topic.
    top = wait_for(lambda: (t := page("biglda-top-words")) and t["words"] and t, 20,
                   "the top-words table")
    vocab = set(map(str, Corpus.open(demo_corpus).vocab))
    assert len(top["words"]) == N_TOPICS
    words = [w for row in top["words"] for w in row.split()]
    assert words and set(words) <= vocab

    shot = artifacts_dir / "live-page.png"
    browser.save_screenshot(str(shot))
    print(f"live page screenshot: {shot} (seen mid-run: {mid_run})")
    assert console_errors(browser, origin) == []


def test_metrics_records_match_model_history(live_run, local_cluster):
    from biglda.model.store import open_model_group

    live_run.join()
    records = list(live_run.records)
    json.dumps(records)  # the contract says JSON-serializable
    assert records[0]["type"] == "start" and records[-1]["type"] == "end"
    assert records[-1]["status"] == "ok"
    its = [r for r in records if r["type"] == "iteration"]
    assert [r["iteration"] for r in its] == list(range(1, ITERATIONS + 1))
    assert {r["run_id"] for r in records} == {records[0]["run_id"]}

    workers = set(local_cluster.scheduler_info(n_workers=-1)["workers"])
    for r in its:
        assert set(r) >= ITERATION_FIELDS, ITERATION_FIELDS - set(r)
        assert r["n_iterations"] == ITERATIONS
        assert r["tokens_per_s"] > 0 and r["bytes_pushed"] >= 0 and r["bytes_pulled"] >= 0
        assert set(r["tokens_per_s_per_worker"]) <= workers and set(r["clocks"]) <= workers
        assert 0 <= r["accept_rate"] <= 1  # lightlda: Metropolis-Hastings
        assert r["eta_s"] >= 0 and math.isfinite(r["ll_per_token"]) and r["ll_per_token"] < 0
    assert all(a["elapsed"] <= b["elapsed"] for a, b in itertools.pairwise(its))
    assert its[-1]["eta_s"] == 0
    tops = [r["top_words"] for r in its if r["top_words"]]
    assert tops and all(len(t) == N_TOPICS for t in tops)

    history = open_model_group(live_run.out).attrs["history"]
    assert [h["iteration"] for h in history] == [r["iteration"] for r in its]
    assert all(math.isclose(h["ll_per_token"], r["ll_per_token"])
               for h, r in zip(history, its, strict=True))


def test_report_of_the_real_model(live_run, tmp_path):
    from dashboards.report import write_report

    live_run.join()
    out = write_report(live_run.out, str(tmp_path / "report.html"))
    text = pathlib.Path(out).read_text(encoding="utf-8")
    assert f"iterations <b>{ITERATIONS}</b>" in text and "Throughput per worker" in text


def test_embedded_cluster_serves_the_page_during_its_run(demo_corpus, tmp_path):
    """train() without a scheduler: its own LocalCluster serves /biglda while it runs."""
    import urllib.request

    from biglda.model.training import train_to_store as train

    answers: list[tuple[int, str]] = []

    def on_record(record: dict) -> None:
        if record["type"] == "start":
            pages = [p for p in record.get("pages", []) if p.endswith("/biglda")]
            assert pages, record.get("pages")
            with urllib.request.urlopen(pages[0], timeout=10) as resp:
                answers.append((resp.status, resp.read().decode()))

    train(demo_corpus, str(tmp_path / "model.zarr"), n_topics=4, iterations=2, workers=1,
          checkpoint_every=0, on_record=on_record)
    assert len(answers) == 1
    status, body = answers[0]
    assert status == 200 and "<title>biglda: training</title>" in body
