"""``sampler="auto"``: the documented rule (docs/samplers.md) for a few (K, corpus, backend)
cases, and the choice recorded by a real training (start record, model attrs, CLI line)."""

from __future__ import annotations

import pytest

from biglda.corpus import write_corpus
from biglda.corpus.synth import SynthSpec, generate
from biglda.errors import SettingError
from biglda.samplers import auto
from biglda.samplers.auto import LARGE_K, SMALL_CORPUS, choose_sampler
from biglda.trainer.config import TrainConfig

# The Debian corpus of the measurements (train part): tokens, documents, V.
DEBIAN = (2_148_714, 55_489, 18_811)


@pytest.mark.parametrize(("k", "corpus", "backends", "expected"), [
    (50, DEBIAN, ["cpu", "cpu"], "cgs"),            # the case: cgs beats lightlda
    (100, DEBIAN, ["cpu"], "cgs"),
    (LARGE_K - 1, DEBIAN, ["cpu"], "cgs"),
    (LARGE_K, DEBIAN, ["cpu"], "warplda"),
    (1000, DEBIAN, ["cpu", "cpu"], "warplda"),
    (10_000, (100_000_000, 1_000_000, 100_000), ["cpu"], "warplda"),
    (1000, (SMALL_CORPUS - 1, 1_000, 500), ["cpu"], "cgs"),   # tiny corpus: exact is free
    (1000, DEBIAN, ["gpu"], "lightlda"),              # the GPU has cgs and lightlda only
    (1000, DEBIAN, ["cpu", "gpu"], "lightlda"),       # one sampler for every worker
    (50, DEBIAN, ["gpu"], "cgs"),
])
def test_auto_picks_what_the_rule_says(k, corpus, backends, expected):
    choice = choose_sampler(k, *corpus, backends=backends)
    assert choice.sampler == expected
    assert f"K={k}" in choice.reason or "small corpus" in choice.reason
    assert "\n" not in choice.reason
    assert choice.as_dict() == {"sampler": expected, "params": {}, "reason": choice.reason}


def test_auto_is_the_default_and_refuses_sampler_params():
    assert TrainConfig(n_topics=10).validated().sampler == "auto"
    with pytest.raises(SettingError, match="sampler_params"):
        TrainConfig(n_topics=10, sampler_params={"mh_steps": 1}).validated()


@pytest.fixture(scope="module")
def corpus_url(tmp_path_factory):
    spec = SynthSpec(n_docs=400, n_words=300, n_topics=6, mean_doc_length=30, seed=11)
    tokens, doc_ptr, _, _ = generate(spec)
    url = str(tmp_path_factory.mktemp("auto") / "corpus.zarr")
    write_corpus(url, tokens, doc_ptr, [f"w{i}" for i in range(spec.n_words)],
                 chunk_tokens=2048)
    return url


@pytest.mark.parametrize("large_k", [None, 4])
def test_the_choice_is_in_the_start_record_and_the_model(local_cluster, corpus_url, tmp_path,
                                                          monkeypatch, large_k):
    """A real training on the 2-worker LocalCluster. ``large_k=4`` lowers the threshold (and
    the small-corpus bound) so K=6 on this corpus takes the warplda branch."""
    from biglda.model.training import train

    expected = "cgs"
    if large_k is not None:
        monkeypatch.setattr(auto, "LARGE_K", large_k)
        monkeypatch.setattr(auto, "SMALL_CORPUS", 0)
        expected = "warplda"
    records = []
    model = train(corpus_url, str(tmp_path / "model.zarr"), n_topics=6, iterations=3,
                  scheduler=local_cluster, checkpoint_every=0, on_record=records.append)
    start = next(r for r in records if r["type"] == "start")
    choice = model.attrs["sampler_choice"]
    assert choice["sampler"] == expected and choice["requested"] == "auto"
    assert choice["reason"] and start["sampler_choice"] == choice
    assert model.attrs["sampler"] == expected
    assert model.attrs["config"]["sampler"] == expected  # what ran (a resume runs the same)
    assert model.attrs["config"]["init"] == "random"  # the default first topics


def test_a_named_sampler_is_recorded_as_named(local_cluster, corpus_url, tmp_path):
    from biglda.model.training import train

    records = []
    model = train(corpus_url, str(tmp_path / "model.zarr"), n_topics=6, iterations=2,
                  sampler="lightlda", init="sequential", scheduler=local_cluster,
                  checkpoint_every=0, on_record=records.append)
    assert model.attrs["config"]["init"] == "sequential"
    assert model.attrs["sampler_choice"]["sampler"] == "lightlda"
    assert model.attrs["sampler_choice"]["requested"] == "lightlda"
    assert next(r for r in records if r["type"] == "start")["sampler_choice"] is None


def test_the_cli_prints_the_choice_in_one_line(local_cluster, corpus_url, tmp_path, capsys):
    from biglda.cli import main

    out = str(tmp_path / "model.zarr")
    code = main(["train", corpus_url, "--out", out, "-k", "6", "--iterations", "2",
                 "--checkpoint-every", "0", "--scheduler", local_cluster.scheduler.address])
    assert code in (0, None)
    printed = capsys.readouterr().out.splitlines()
    lines = [ln for ln in printed if ln.startswith("sampler auto")]
    assert lines == [lines[0]] and lines[0].startswith("sampler auto: cgs (small corpus")
    assert [ln for ln in printed if ln.startswith("layout: ")] == []  # --scheduler: none
