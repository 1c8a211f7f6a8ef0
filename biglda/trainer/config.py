"""The training settings: each declared once, as a field of :class:`TrainConfig`.

A field's :class:`Setting` (in its metadata) holds everything else that is said about it: the
help text, the check of its value, how text becomes a value, and the CLI flag. From it come

- ``biglda train``'s flags and ``--help`` (:func:`biglda.cli.train._add_train`),
- the keys a pipeline's ``train`` stage accepts (:func:`setting_names`),
- the validation and its messages, which name the setting (``n_topics must be >= 2, got 1``;
  the CLI puts the flag in place of the name),
- the worker task's settings (the config travels in :class:`biglda.trainer.worker.GroupSpec`).

Adding a setting is one field here; the places that use it read it from the config.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from biglda.errors import ConfigError, OutputExistsError, SettingError

#: how shards are placed on workers of unequal speed (see :mod:`biglda.trainer.placement`)
Balance = Literal["auto", "throughput", "none"]
BALANCE_CHOICES: tuple[str, ...] = get_args(Balance)
TURNS_CHOICES = ("auto", "on", "off")

Check = Callable[[Any], str | None]


# The sampler layer's declarations, read on first use: importing biglda.samplers loads the
# numba kernels (about a second), and every `biglda` command builds the train flags.
def _algorithms() -> tuple[str, ...]:
    from biglda.samplers.registry import ALGORITHMS

    return tuple(ALGORITHMS)


def _sampler_choices() -> tuple[str, ...]:
    """``--sampler``'s values: every algorithm, and ``auto`` (:mod:`biglda.samplers.auto`)."""
    return ("auto", *_algorithms())


def _inits() -> tuple[str, ...]:
    from biglda.samplers.init import INIT_CHOICES

    return INIT_CHOICES


def _backends() -> tuple[str, ...]:
    from biglda.samplers.backends import BACKEND_CHOICES

    return tuple(BACKEND_CHOICES)


def _n_topics(v: Any) -> str | None:
    from biglda.samplers.counts import check_n_topics

    return check_n_topics(v)


@dataclass(frozen=True)
class Setting:
    """What is declared about one training setting besides its name, type and default.

    ``check(value)`` returns what is wrong (``"must be >= 1, got 0"``) or None; ``parse(text)``
    turns the text of a flag or a pipeline value into a value; ``flag`` is the CLI flag
    (``short`` an extra short one); ``choices`` the allowed values; ``stored``: kept in the
    model's ``config`` attribute; ``kind``: ``"value"``, ``"switch"`` (a flag without a value)
    or ``"pairs"`` (a repeatable ``KEY=VALUE`` flag filling a dict).
    """

    help: str
    flag: str
    check: Check | None = None
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    short: str | None = None
    metavar: str | None = None
    stored: bool = False
    kind: Literal["value", "switch", "pairs"] = "value"

    def choice_list(self) -> tuple[str, ...]:
        """Return the allowed values (empty: any)."""
        return self.choices() if callable(self.choices) else tuple(self.choices)


# ----------------------------------------------------------------------------- checks


def _int(lo: int | None = None) -> Check:
    def check(v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            return f"must be an integer, got {v!r}"
        return f"must be >= {lo}, got {v}" if lo is not None and v < lo else None
    return check


def _optional(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


def parse_alpha(text: str) -> float | list[float]:
    """``--alpha``'s text: one number (symmetric) or K comma-separated numbers."""
    parts = [p for p in str(text).split(",") if p.strip()]
    return float(parts[0]) if len(parts) == 1 else [float(p) for p in parts]


def _alpha(v: Any) -> str | None:
    if isinstance(v, list | tuple | np.ndarray):
        values = list(np.asarray(v).ravel()) if isinstance(v, np.ndarray) else list(v)
        if not values:
            return "must be a number or n_topics numbers, got none"
        for x in values:
            problem = _positive(x)
            if problem:
                return f"{problem} (in {list(values)})"
        return None
    return _positive(v)


def _positive(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float | np.number):
        return f"must be a number, got {v!r}"
    return None if np.isfinite(v) and v > 0 else f"must be > 0, got {v}"


def _non_negative(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float | np.number):
        return f"must be a number, got {v!r}"
    return None if np.isfinite(v) and v >= 0 else f"must be >= 0, got {v}"


def _fraction(v: Any) -> str | None:
    return None if isinstance(v, int | float) and 0 <= v < 1 else f"must lie in [0, 1), got {v}"


def _one_of(choices: tuple[str, ...] | Callable[[], tuple[str, ...]]) -> Check:
    def check(v: Any) -> str | None:
        allowed = choices() if callable(choices) else choices
        return None if v in allowed else f"must be one of {', '.join(allowed)}, got {v!r}"
    return check


def _staleness(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float | np.number) or not v >= 0:
        return f"must be >= 0 (or inf), got {v!r}"
    if v != math.inf and v != int(v):
        return f"must be a whole number of clocks or inf, got {v}"
    return None


def _backends_by_worker(v: Any) -> str | None:
    bad = {w: b for w, b in dict(v).items() if b not in _backends()}
    return (f"must map workers to one of {', '.join(_backends())}, got {bad}"
            if bad else None)


def parse_staleness(text: Any) -> float:
    """``"inf"`` (or ``"infinity"``, ``"async"``) or a whole number of clocks, as a float.

    Examples
    --------
    >>> parse_staleness("inf"), parse_staleness("2")
    (inf, 2.0)
    """
    if isinstance(text, str):
        if text.strip().lower() in ("inf", "infinity", "async"):
            return math.inf
        try:
            return float(int(text))
        except ValueError:
            raise ValueError(f"expected a whole number of clocks or 'inf', got {text!r}") from None
    return float(text)


def _parse_bool(text: str) -> bool:
    low = str(text).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _setting(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
             **meta: Any) -> Any:
    """Return a dataclass field carrying its :class:`Setting`."""
    kw: dict[str, Any] = {"metadata": {"setting": Setting(**meta)}}
    if factory is not dataclasses.MISSING:
        kw["default_factory"] = factory
    elif default is not dataclasses.MISSING:
        kw["default"] = default
    return field(**kw)


# ----------------------------------------------------------------------------- the settings


@dataclass
class TrainConfig:
    """The settings of one training run, each declared once (see the module docstring).

    Build one with keywords (``TrainConfig(n_topics=20, iterations=50)``) and check it with
    :meth:`validated` (or :func:`biglda.model.training.train`, which does). The ``stored``
    ones are the model's ``config`` attribute (:meth:`as_dict`).
    """

    n_topics: int = _setting(flag="--topics", short="-k", check=_n_topics, parse=int,
                             metavar="K", stored=True, help="number of topics K (required)")
    iterations: int = _setting(100, flag="--iterations", check=_int(1), parse=int, stored=True,
                               metavar="N",
                               help="sweeps in total, counting a resumed run's (default 100)")
    sampler: str = _setting("auto", flag="--sampler", choices=_sampler_choices,
                            check=_one_of(_sampler_choices), metavar="NAME", stored=True,
                            help="auto (default): chosen from K, the corpus and the backend "
                                 "by the rule in docs/samplers.md (cgs at small K, warplda at "
                                 "large K on CPU); cgs: exact collapsed Gibbs (SparseLDA); "
                                 "lightlda: Metropolis-Hastings, O(1)/token; warplda: "
                                 "WarpLDA's delayed-update MH, O(1)/token, fastest at large K")
    sampler_params: dict = _setting(factory=dict, flag="--sampler-param", kind="pairs",
                                    metavar="NAME=VALUE", stored=True,
                                    help="a parameter the sampler declares, e.g. mh_steps=1 "
                                         "for lightlda, variant=plain for cgs (repeatable)")
    init: str = _setting("random", flag="--init", choices=_inits, check=_one_of(_inits),
                         metavar="HOW", stored=True,
                         help="the first topics: random (default: uniform) or sequential "
                              "(each token drawn from the counts so far, Griffiths & "
                              "Steyvers: faster first sweeps, but behind random from 10 s "
                              "on in docs/samplers.md's measurement)")
    alpha: float | list[float] = _setting(
        0.1, flag="--alpha", check=_alpha, parse=parse_alpha, stored=True, metavar="A[,A...]",
        help="doc-topic prior: one number (symmetric, default 0.1) or K comma-separated "
             "numbers (asymmetric)")
    beta: float = _setting(0.01, flag="--beta", check=_positive, parse=float, stored=True,
                           help="symmetric topic-word prior (default 0.01)")
    staleness: float = _setting(0.0, flag="--staleness", check=_staleness,
                                parse=parse_staleness, metavar="S", stored=True,
                                help="SSP staleness in clocks: 0 = BSP (default), N, or inf "
                                     "(asynchronous)")
    comm_budget: float = _setting(0.0, flag="--comm-budget", check=_non_negative, parse=float,
                                  metavar="MB/S", stored=True,
                                  help="managed communication: each worker process sends "
                                       "its largest changes early, up to this many MB/s, "
                                       "between rounds of a clock (0 = off, the default; "
                                       "runs are then no longer bit-reproducible)")
    rounds: int | None = _setting(None, flag="--rounds", check=_optional(_int(1)), parse=int,
                                  metavar="N", stored=True,
                                  help="sweep each clock in N rounds of documents: a "
                                       "process's threads add each other's moves after every "
                                       "round, and --comm-budget sends between rounds "
                                       "(default: 4 with a budget, or with several threads "
                                       "that sweep parts of their own: cgs's plain kernel; "
                                       "else 1)")
    process_partition: str = _setting(
        "auto", flag="--process-partition", choices=TURNS_CHOICES,
        check=_one_of(TURNS_CHOICES), stored=True,
        help="worker processes take turns on the vocabulary within a clock (tomotopy's "
             "PARTITION across processes): P processes sweep a clock in steps, each step "
             "one window of the words that no other process resamples then, the steps' moves "
             "exchanged between them, so the processes share one chain (but for n_k) instead "
             "of sweeping against the clock before (AD-LDA). auto (default): on where it can "
             "run, with BSP (--staleness 0), no --comm-budget or --rounds, CPU workers and "
             "the cgs (sparse or dense) or lightlda sampler; on: those or an error; off: "
             "AD-LDA")
    # two windows a process: with one, each step waits for the step before on its window,
    # and any difference between the processes' steps is lost every step; two halved the
    # waits of 2 processes (pipelines/README.md, "Twenty-second session")
    turn_windows: int = _setting(
        2, flag="--turn-windows", check=_int(1), parse=int, metavar="M", stored=True,
        help="with --process-partition, cut the vocabulary into M windows per process (a "
             "clock is M x P steps): a step then waits for the process that had its window "
             "M steps before, so steps of unequal length even out within a clock (default 2, "
             "for a core a process; 1 where processes outnumber the cores)")
    seed: int = _setting(0, flag="--seed", check=_int(), parse=int, stored=True,
                         help="all randomness is keyed by (seed, iteration, shard) (default 0)")
    checkpoint_every: int = _setting(10, flag="--checkpoint-every", check=_int(0), parse=int,
                                     metavar="N", stored=True,
                                     help="write z every N iterations next to --out (0 = "
                                          "never; default 10)")
    resume: bool = _setting(False, flag="--resume", kind="switch", parse=_parse_bool,
                            stored=True, help="continue from the checkpoint next to --out")
    max_seconds: float | None = _setting(None, flag="--max-seconds", check=_optional(_positive),
                                         parse=float, metavar="SECONDS", stored=True,
                                         help="stop after this wall time")
    tol: float | None = _setting(None, flag="--tol", check=_optional(_positive), parse=float,
                                 stored=True, help="stop once the relative log-likelihood "
                                                   "change per iteration is below this")
    n_shards: int | None = _setting(None, flag="--shards", check=_optional(_int(1)), parse=int,
                                    metavar="N",
                                    stored=True, help="document shards (default: one per "
                                                      "worker thread)")
    optimize_alpha_every: int = _setting(0, flag="--optimize-alpha-every", check=_int(0),
                                         parse=int, metavar="N", stored=True,
                                         help="learn an asymmetric alpha (Minka's fixed point) "
                                              "every N iterations after the burn-in (0 = keep "
                                              "--alpha; default 0)")
    optimize_alpha_burn_in: int | None = _setting(
        None, flag="--optimize-alpha-burn-in", check=_optional(_int(0)), parse=int, metavar="N",
        help="clocks before the first alpha optimization (default max(10, 2N))")
    optimize_alpha_iterations: int = _setting(
        20, flag="--optimize-alpha-iterations", check=_int(1), parse=int, metavar="N",
        help="fixed-point iterations per alpha optimization (default 20)")
    backend: str = _setting("cpu", flag="--backend", choices=_backends, metavar="BACKEND",
                            check=_one_of(_backends), stored=True,
                            help="sampler backend, chosen on each worker: cpu (default), gpu "
                                 "(an error without a usable GPU), auto (the GPU where one "
                                 "works, else CPU)")
    worker_backends: dict = _setting(factory=dict, flag="--worker-backend", kind="pairs",
                                     metavar="ADDR=BACKEND", check=_backends_by_worker,
                                     help="the backend of one worker, overriding --backend "
                                          "(repeatable)")
    gpu_sampler_params: dict = _setting(factory=dict, flag="--gpu-sampler-param", kind="pairs",
                                        metavar="NAME=VALUE",
                                        help="a parameter of the GPU sampler (repeatable)")
    balance: str = _setting("auto", flag="--balance", choices=BALANCE_CHOICES,
                            check=_one_of(BALANCE_CHOICES), stored=True,
                            help="place shards in proportion to each worker's measured "
                                 "tokens/s after the first clocks: auto (default: when "
                                 "workers run different backends), throughput (always), none")
    balance_after: int = _setting(2, flag="--balance-after", check=_int(1), parse=int,
                                  metavar="N", help="clocks measured (the first not counted) "
                                                    "before the balance (default 2)")
    shards_per_worker: int = _setting(4, flag="--shards-per-worker", check=_int(1), parse=int,
                                      metavar="N", help="shards per worker thread when "
                                                        "balancing (default 4)")
    balance_min_gain: float = _setting(0.1, flag="--balance-min-gain", check=_fraction,
                                       parse=float, metavar="FRACTION",
                                       help="balance only if the slowest worker's time per "
                                            "clock drops by this fraction (default 0.1)")
    rebalance_after: int = _setting(3, flag="--rebalance-after", check=_int(0), parse=int,
                                    metavar="N", help="straggler clocks in a row before its "
                                                      "shards move (0 = never; default 3)")
    straggler_factor: float = _setting(2.0, flag="--straggler-factor", check=_positive,
                                       parse=float, metavar="X",
                                       help="a straggler samples this many times slower per "
                                            "token than the others (default 2)")
    max_recoveries: int = _setting(3, flag="--max-recoveries", check=_int(0), parse=int,
                                   metavar="N", help="lost workers recovered per run before "
                                                     "giving up (default 3)")
    recovery_wait: float = _setting(10.0, flag="--recovery-wait", check=_non_negative,
                                    parse=float, metavar="SECONDS",
                                    help="how long a recovery waits for a replacement worker "
                                         "(default 10)")
    workers: int | None = _setting(None, flag="--workers", check=_optional(_int(1)), parse=int,
                                   metavar="N",
                                   help="worker processes of the embedded cluster (default: "
                                        "the layout `biglda layout --measure` found fastest "
                                        "here, else 1; with --backend gpu/auto and "
                                        "GPUs: one per GPU, plus under auto this many CPU "
                                        "workers)")
    threads_per_worker: int | None = _setting(
        None, flag="--threads-per-worker", check=_optional(_int(1)), parse=int, metavar="N",
        help="sampling threads per worker (default: with neither this nor --workers, the "
             "layout `biglda layout --measure` found fastest here, else one per core; "
             "with --workers alone, 1)")
    scheduler: Any = _setting(None, flag="--scheduler", metavar="ADDR",
                              help="Dask scheduler address (tcp://host:port) or, from Python, "
                                   "a Client; default: an embedded cluster")
    connect_timeout: float = _setting(10.0, flag="--connect-timeout", check=_positive,
                                      parse=float, metavar="SECONDS",
                                      help="how long to try reaching --scheduler, and the "
                                           "tasks' connects to actors (default 10)")
    call_timeout: float = _setting(120.0, flag="--call-timeout", check=_positive, parse=float,
                                   metavar="SECONDS", help="the longest an actor call may take "
                                                           "(default 120)")
    top_words_every: int = _setting(10, flag="--top-words-every", check=_int(0), parse=int,
                                    metavar="N", help="top words in the metrics record every N "
                                                      "iterations (0 = never; default 10)")
    overwrite: bool = _setting(False, flag="--overwrite", kind="switch", parse=_parse_bool,
                               help="replace an existing --out")
    slow_shards: dict = _setting(factory=dict, flag="--slow-shard", kind="pairs",
                                 metavar="SHARD=SECONDS",
                                 help="debug: extra sleep of a shard per clock (repeatable)")
    slow_workers: dict = _setting(factory=dict, flag="--slow-worker", kind="pairs",
                                  metavar="ADDR=SECONDS",
                                  help="debug: extra sleep of a worker per shard per clock "
                                       "(repeatable)")

    @property
    def alpha_burn_in(self) -> int:
        """Clocks before the first optimization (default ``max(10, 2 N)``)."""
        if self.optimize_alpha_burn_in is not None:
            return int(self.optimize_alpha_burn_in)
        return max(10, 2 * int(self.optimize_alpha_every))

    def as_dict(self) -> dict[str, Any]:
        """Return the stored settings (the model's and the checkpoint's ``config`` attribute)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if setting_of(f.name).stored}
        if self.optimize_alpha_every:
            d["optimize_alpha_burn_in"] = self.alpha_burn_in
        d["staleness"] = "inf" if math.isinf(self.staleness) else self.staleness
        return d

    @classmethod
    def from_settings(cls, config: TrainConfig | None = None, **overrides: Any) -> TrainConfig:
        """``config`` (or the defaults) with ``overrides``, text converted, then validated."""
        unknown = sorted(set(overrides) - set(setting_names()))
        if unknown:
            raise ConfigError(f"unknown training setting(s) {', '.join(unknown)} "
                              f"(known: {', '.join(setting_names())})")
        values = {k: _coerce(k, v) for k, v in overrides.items()}
        if config is not None:
            return dataclasses.replace(config, **values).validated()
        if "n_topics" not in values:
            raise SettingError("n_topics", "is required")
        return cls(**values).validated()

    def validated(self) -> TrainConfig:
        """``self`` after checking every setting; a bad one is a :class:`SettingError`."""
        for f in dataclasses.fields(self):
            problem = _check(f.name, getattr(self, f.name))
            if problem:
                raise SettingError(f.name, problem)
        from biglda.samplers.registry import get_sampler, parse_sampler_params

        if self.sampler == "auto":
            # the settings belong to the sampler auto picks, known once the corpus and the
            # workers are (biglda.samplers.auto); given ones would apply to an unknown sampler
            if self.sampler_params:
                raise SettingError("sampler_params", "need a named sampler, not sampler=auto "
                                                     "(pick one with --sampler)")
        else:
            try:
                self.sampler_params = parse_sampler_params(self.sampler, self.sampler_params)
                get_sampler(self.sampler, **self.sampler_params)  # (bad values fail here)
            except ConfigError as exc:
                raise SettingError("sampler_params", f": {exc}") from None
        if self.process_partition == "on":
            problem = self.turns_problem(self.sampler)
            if problem:
                raise SettingError("process_partition", problem)
        if self.comm_budget > 0 and self.rounds == 1:
            raise SettingError("rounds", "must be >= 2 with --comm-budget (early updates go "
                                         "between rounds), got 1")
        if isinstance(self.alpha, list | tuple | np.ndarray):
            values = [float(a) for a in np.asarray(self.alpha, dtype=float).ravel()]
            if len(values) != int(self.n_topics):
                raise SettingError("alpha", f"must be a number or n_topics ({self.n_topics}) "
                                            f"numbers, got {len(values)}")
            self.alpha = values
        for name, s in settings().items():  # numbers in their declared type (stored so)
            value = getattr(self, name)
            if value is not None and s.parse in (int, float, parse_staleness, parse_alpha) \
                    and not isinstance(value, list):
                setattr(self, name, float(value) if s.parse is not int else int(value))
        return self

    def turns_problem(self, sampler: str, gpu: bool = False) -> str | None:
        """Return why the processes cannot take turns on the vocabulary, or None.

        ``sampler``: the run's (``auto``: not known yet, no objection); ``gpu``: a worker
        runs the GPU backend.
        """
        from biglda.samplers.registry import get_sampler

        if self.staleness != 0:
            return "needs BSP (--staleness 0): a process waits for every other's step"
        if self.comm_budget > 0 or (self.rounds or 1) > 1:
            return "cannot run with --comm-budget or --rounds (the steps exchange the moves)"
        if gpu or self.backend == "gpu":
            return "runs on the CPU backend only"
        params = self.sampler_params if sampler == self.sampler else {}
        if sampler != "auto" and not getattr(get_sampler(sampler, **params), "word_windows",
                                             False):
            return (f"needs a sampler whose sweep takes a window of words (cgs's sparse or "
                    f"dense kernel, lightlda), not {sampler!r}")
        return None

    def takes_turns(self, sampler: str, gpu: bool = False) -> bool:
        """Say whether the processes take turns on the vocabulary (``auto`` resolved)."""
        if self.process_partition == "off":
            return False
        return self.turns_problem(sampler, gpu) is None

    def with_sampler_chosen(self, corpus: Any, backends: Any
                            ) -> tuple[TrainConfig, dict[str, Any] | None]:
        """Resolve ``sampler="auto"`` to what its rule picks for ``corpus``.

        Returns ``self`` with ``sampler="auto"`` replaced by the pick for ``corpus`` (an
        opened Corpus) on workers running ``backends`` ({worker: backend}), and the choice
        (``{requested, sampler, params, reason}``); a named sampler: ``(self, None)``. Also
        ``process_partition="auto"`` resolved (:meth:`takes_turns`) in the copy returned.
        """
        gpu = any(b == "gpu" for b in dict(backends).values())
        if self.sampler != "auto":
            return self._turns_resolved(gpu), None
        from biglda.samplers.auto import choose_sampler

        choice = choose_sampler(self.n_topics, corpus.n_tokens, corpus.n_docs, corpus.n_words,
                                dict(backends).values())
        cfg = dataclasses.replace(self, sampler=choice.sampler,
                                  sampler_params=dict(choice.params)).validated()
        return cfg._turns_resolved(gpu), {"requested": "auto", **choice.as_dict()}

    def _turns_resolved(self, gpu: bool) -> TrainConfig:
        """Return ``self`` with ``process_partition="auto"`` resolved to "on" or "off".

        "on" with a GPU worker is a SettingError (the GPU samplers take no window of words).
        """
        if self.process_partition == "on" and gpu:
            raise SettingError("process_partition", "runs on the CPU backend only")
        if self.process_partition != "auto":
            return self
        on = self.takes_turns(self.sampler, gpu)
        return dataclasses.replace(self, process_partition="on" if on else "off")

    def for_workers(self) -> TrainConfig:
        """Return a copy a task can carry (the scheduler may be a ``Client``: left out)."""
        return dataclasses.replace(self, scheduler=None)


def _check(name: str, value: Any) -> str | None:
    s = setting_of(name)
    if s.check is not None:
        return s.check(value)
    if s.kind == "pairs" and not isinstance(value, dict):
        return f"must be a mapping, got {value!r}"
    return None


def _coerce(name: str, value: Any) -> Any:
    """Convert a value given as text (a pipeline's TOML, ``staleness="inf"``) to its type.

    The type is the setting's; dicts of the debug settings get their key and value types.
    """
    s = setting_of(name)
    try:
        if isinstance(value, str) and s.parse is not None:
            return s.parse(value)
        if name == "slow_shards" and isinstance(value, dict):
            return {int(k): float(v) for k, v in value.items()}
        if name == "slow_workers" and isinstance(value, dict):
            return {str(k): float(v) for k, v in value.items()}
    except (TypeError, ValueError):
        wanted = {int: "an integer", float: "a number", parse_staleness: "a whole number of "
                  "clocks or inf", _parse_bool: "true or false"}.get(s.parse, "valid")
        raise SettingError(name, f"must be {wanted}, got {value!r}") from None
    return value


def settings() -> dict[str, Setting]:
    """``{name: Setting}`` of every training setting, in declaration order."""
    return {f.name: f.metadata["setting"] for f in dataclasses.fields(TrainConfig)}


def setting_of(name: str) -> Setting:
    """Return the :class:`Setting` of ``name``."""
    return settings()[name]


def setting_names() -> tuple[str, ...]:
    """Return the names of every training setting.

    They are the keyword arguments of ``train`` and the keys of a pipeline's ``train`` stage
    (besides ``corpus``).
    """
    return tuple(settings())


def parse_pairs(name: str, items: list[str]) -> dict[str, str]:
    """``["a=1", "b=x"]`` (a repeatable ``KEY=VALUE`` flag) as ``{"a": "1", "b": "x"}``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SettingError(name, f"expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def validate(corpus_url: str, out: str | None, cfg: TrainConfig,
             overwrite: bool | None = None) -> Any:
    """Check every setting and input before anything starts; return the opened corpus.

    ``overwrite``: replace an existing ``out`` (default ``cfg.overwrite``).
    """
    from biglda.corpus import Corpus
    from biglda.io import exists
    from biglda.trainer import checkpoint as ckpt

    cfg.validated()
    overwrite = cfg.overwrite if overwrite is None else overwrite
    if cfg.resume and out is None:
        raise SettingError("resume", "needs an output path (the checkpoint lives next to it)")
    corpus = Corpus.open(corpus_url)
    if corpus.n_tokens == 0:
        raise ConfigError(f"{corpus_url}: the corpus has no tokens")
    if out is not None and exists(out) and not overwrite:
        raise OutputExistsError(f"output {out} already exists (use --overwrite to replace it)")
    if cfg.resume:
        if out is None:
            raise SettingError("resume", "needs the output (its checkpoint lives beside it)")
        ckpt.open_checkpoint(ckpt.checkpoint_url(out), cfg.n_topics, corpus.n_tokens)
    return corpus
