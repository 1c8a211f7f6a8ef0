"""The settings declaration: every setting has a flag and help, ``biglda train --help`` lists
exactly the declared ones, bad values name the setting (library) or the flag (CLI)."""

from __future__ import annotations

import re

import pytest

from biglda.cli import build_parser, main
from biglda.errors import ConfigError, SettingError
from biglda.samplers import MAX_TOPICS, parse_sampler_params, z_dtype
from biglda.trainer.config import TrainConfig, settings

BAD = [  # (setting, bad value, words of the problem)
    ("n_topics", 1, "must be >= 2"),
    ("n_topics", MAX_TOPICS + 1, f"must be <= {MAX_TOPICS}"),
    ("iterations", 0, "must be >= 1"),
    ("sampler", "gibbs", "must be one of"),
    ("alpha", -1.0, "must be > 0"),
    ("staleness", 1.5, "whole number"),
    ("staleness", "soon", "whole number"),
    ("backend", "tpu", "must be one of"),
    ("balance", "fast", "must be one of"),
    ("checkpoint_every", -1, "must be >= 0"),
    ("workers", 0, "must be >= 1"),
    ("balance_min_gain", 1.5, "must lie in"),
    ("process_partition", "maybe", "must be one of"),
    ("turn_windows", 0, "must be >= 1"),
]


def test_every_setting_has_a_flag_and_help():
    for name, s in settings().items():
        assert s.flag.startswith("--") and s.help, name


def test_train_help_lists_exactly_the_declared_settings():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    train = sub.choices["train"]
    flags = {o for a in train._actions for o in a.option_strings if o.startswith("--")}
    declared = {s.flag for s in settings().values()}
    assert flags - {"--help", "--out", "--metrics"} == declared


@pytest.mark.parametrize("name, value, problem", BAD)
def test_bad_values_name_the_setting(name, value, problem):
    kw = {"n_topics": 4, name: value}
    with pytest.raises(SettingError) as err:
        TrainConfig.from_settings(**kw)
    assert str(err.value).startswith(f"{name} ") and problem in str(err.value)


@pytest.mark.parametrize("name, value, problem", BAD)
def test_bad_values_name_the_flag_in_the_cli(name, value, problem, tmp_path, capsys):
    s = settings()[name]
    args = ["train", str(tmp_path / "c.zarr"), "--out", str(tmp_path / "m.zarr"), "-k", "4",
            s.flag, str(value)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"biglda: error: {s.flag} ") and problem in err[0]


def test_unknown_setting_and_missing_topics():
    with pytest.raises(ConfigError, match="unknown training setting"):
        TrainConfig.from_settings(n_topics=4, topics=4)
    with pytest.raises(SettingError, match="n_topics is required"):
        TrainConfig.from_settings(iterations=3)


def test_text_values_are_parsed_once():
    cfg = TrainConfig.from_settings(n_topics="4", staleness="inf", alpha="0.5", resume="false")
    assert (cfg.n_topics, cfg.staleness, cfg.alpha, cfg.resume) == (4, float("inf"), 0.5, False)
    assert cfg.as_dict()["staleness"] == "inf"


def test_sampler_params_are_declared_by_the_sampler():
    assert TrainConfig.from_settings(n_topics=4, sampler="lightlda",
                                     sampler_params={"mh_steps": "1"}
                                     ).sampler_params == {"mh_steps": 1}
    assert parse_sampler_params("cgs", {"variant": "plain"}) == {"variant": "plain"}
    with pytest.raises(SettingError, match=re.escape(
            "sampler_params: sampler 'cgs' has no parameter 'mh_steps' (known: dense_above, "
            "variant)")):
        TrainConfig.from_settings(n_topics=4, sampler="cgs", sampler_params={"mh_steps": 1})
    with pytest.raises(SettingError, match="mh_steps must be >= 1"):
        TrainConfig.from_settings(n_topics=4, sampler="lightlda", sampler_params={"mh_steps": 0})


def test_sampler_param_flag_reaches_the_config(monkeypatch, tmp_path):
    seen = {}

    def fake(corpus, out, cfg, on_record=None):
        seen["cfg"] = cfg
        return out

    monkeypatch.setattr("biglda.model.training.train_to_store", fake)
    assert main(["-q", "train", "c.zarr", "--out", str(tmp_path / "m.zarr"), "-k", "4",
                 "--sampler", "lightlda", "--sampler-param", "mh_steps=1",
                 "--staleness", "inf"]) == 0
    assert seen["cfg"].sampler_params == {"mh_steps": 1}
    assert seen["cfg"].staleness == float("inf")


def test_one_rule_for_the_number_of_topics():
    assert z_dtype(65535).name == "uint16" and z_dtype(65536).name == "int32"
    assert TrainConfig.from_settings(n_topics=70000).n_topics == 70000


TURNS_REFUSED = [
    ({"staleness": 1}, "needs BSP"),
    ({"comm_budget": 5.0}, "cannot run with --comm-budget"),
    ({"rounds": 2}, "cannot run with --comm-budget or --rounds"),
    ({"backend": "gpu"}, "CPU backend only"),
    ({"sampler": "warplda"}, "not 'warplda'"),
    ({"sampler": "cgs", "sampler_params": {"variant": "plain"}}, "window of words"),
]


@pytest.mark.parametrize("extra, problem", TURNS_REFUSED)
def test_process_partition_on_refuses_what_it_cannot_run_with(extra, problem):
    kw = {"n_topics": 4, "sampler": "cgs", "process_partition": "on"} | extra
    with pytest.raises(SettingError) as err:
        TrainConfig.from_settings(**kw)
    assert str(err.value).startswith("process_partition ") and problem in str(err.value)


@pytest.mark.parametrize("extra, problem", TURNS_REFUSED)
def test_process_partition_auto_is_off_where_on_is_refused(extra, problem):
    """auto resolves, with the sampler chosen, to on exactly where "on" would run."""
    from types import SimpleNamespace

    corpus = SimpleNamespace(n_tokens=10_000, n_docs=100, n_words=500)
    cfg = TrainConfig.from_settings(**({"n_topics": 4, "sampler": "cgs"} | extra))
    assert cfg.process_partition == "auto"
    resolved, _ = cfg.with_sampler_chosen(corpus, {"w": "cpu"})
    assert resolved.process_partition == "off" and problem in cfg.turns_problem(cfg.sampler)
    for sampler in ("cgs", "lightlda"):
        ok = TrainConfig.from_settings(n_topics=4, sampler=sampler)
        assert ok.with_sampler_chosen(corpus, {"w": "cpu"})[0].process_partition == "on"
        assert ok.with_sampler_chosen(corpus, {"w": "gpu"})[0].process_partition == "off"
    on = TrainConfig.from_settings(n_topics=4, sampler="cgs", process_partition="on")
    with pytest.raises(SettingError, match="CPU backend only"):
        on.with_sampler_chosen(corpus, {"w": "gpu"})
    off = TrainConfig.from_settings(n_topics=4, sampler="cgs", process_partition="off")
    assert off.with_sampler_chosen(corpus, {"w": "cpu"})[0].process_partition == "off"
