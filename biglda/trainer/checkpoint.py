"""Checkpoints of ``z``: a ``<model>.checkpoint.zarr`` group next to the output model.

The parameter server is a function of all ``z`` (DESIGN.md, "Training state"), so ``z`` is all a
checkpoint needs; resuming recounts the table from it. Layout (Zarr v3)::

    attrs     format="biglda-checkpoint", n_topics, n_tokens, shards [[token_start, token_stop]],
              clock (completed sweeps of the committed checkpoint, -1 = none yet), slot (0/1),
              config, history (the metrics records of iterations 1..``clock``, exactly)
    slot0/<i> z of shard i (uint16/int32 [n_i])
    slot1/<i> the other buffer

Writes alternate between the two slots: every shard writes its ``z`` into the slot that is *not*
committed, and the driver moves the ``clock``/``slot`` attributes only after every shard has
reported its write. A run killed in the middle of a write leaves the committed slot untouched, so
the previous checkpoint stays usable. The driver also records in ``decided`` the last clock whose
checkpoint reports it has processed (committed or not), and a worker writes its next checkpoint
only once its previous one is decided (:func:`wait_decided`), into the slot not committed then:
otherwise a worker two checkpoints ahead of a lagging driver wrote into the committed slot (a
recovery then read ``z`` of a later clock under the committed one's; docs/reliability.md).
So under SSP a process ahead of the others waits at a checkpoint until the slowest has
reported the one before (before this rule, with staleness of twice the checkpoint period, a
fast shard could write the next-but-one checkpoint before a slow one finished the current).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import zarr

from biglda.errors import BigLDAError, ConfigError, FormatError
from biglda.io import exists, remove, update_attributes
from biglda.trainer.metrics import history_for_store

# the metrics records of a run, in iteration order (biglda.trainer.metrics)
Record = Mapping[str, Any]
History = Sequence[Record]

log = logging.getLogger("biglda.train")

CHECKPOINT_FORMAT = "biglda-checkpoint"


def checkpoint_url(out: str) -> str:
    """``runs/x/model.zarr`` -> ``runs/x/model.checkpoint.zarr``."""
    out = os.fspath(out).rstrip("/")
    stem = out[:-5] if out.endswith(".zarr") else out
    return f"{stem}.checkpoint.zarr"


def create_checkpoint(url: str, shard_ranges: list[tuple[int, int]], n_topics: int,
                      n_tokens: int, dtype: np.dtype, config: dict[str, Any]) -> None:
    """Create an empty checkpoint store (replacing an old one) with both slots allocated."""
    remove(url)
    g = zarr.open_group(url, mode="w")
    for slot in (0, 1):
        sg = g.create_group(f"slot{slot}")
        for i, (start, stop) in enumerate(shard_ranges):
            n = stop - start
            sg.create_array(str(i), shape=(n,), dtype=dtype, chunks=(max(1, min(n, 2**22)),),
                            fill_value=0)
    update_attributes(g, {"format": CHECKPOINT_FORMAT, "n_topics": int(n_topics),
                    "n_tokens": int(n_tokens), "shards": [list(map(int, r)) for r in shard_ranges],
                    "clock": -1, "slot": 1, "config": config, "history": []})


def write_shard_z(url: str, slot: int, shard: int, z: np.ndarray) -> None:
    """Write one shard's ``z`` into ``slot`` (called on the worker that holds the shard)."""
    arr = zarr.open_array(f"{url.rstrip('/')}/slot{slot}/{shard}", mode="r+")
    arr[:] = z


def history_missing(history: History, clock: int) -> list[int]:
    """Return the iterations of ``1..clock`` that ``history`` has no record of."""
    have = {int(r.get("iteration", -1)) for r in history}
    return [i for i in range(1, int(clock) + 1) if i not in have]


def history_complete(history: History, clock: int) -> bool:
    """Whether ``history`` is exactly the records of iterations ``1..clock``, in order."""
    return [int(r.get("iteration", -1)) for r in history] == list(range(1, int(clock) + 1))


def history_upto(history: History, clock: int) -> list[Record]:
    """Return the records of iterations ``1..clock`` of ``history``, in order.

    Later ones are dropped.

    A missing record is never papered over: the records that exist are kept, and
    :func:`history_missing` tells the caller which are not.
    """
    return [r for r in history if int(r.get("iteration", -1)) <= int(clock)]


def history_valid(history: History, clock: int,
                  allow_missing: frozenset[int] | set[int] = frozenset()) -> bool:
    """Tell whether ``history`` may be committed with ``clock``.

    It may if it holds records of iterations ``1..clock`` in order, each once, the last one
    ``clock``, none missing but those in ``allow_missing``.
    """
    its = [int(r.get("iteration", -1)) for r in history]
    if its != sorted(set(its)) or any(i < 1 or i > clock for i in its):
        return False
    if clock > 0 and (not its or its[-1] != clock):
        return False
    return not set(history_missing(history, clock)) - set(allow_missing)


def commit(url: str, clock: int, slot: int, history: History,
           allow_missing: frozenset[int] | set[int] = frozenset()) -> None:
    """Make ``slot`` (written by every shard at ``clock``) the checkpoint to resume from.

    Invariant: the history stored with a checkpoint is the records of iterations
    ``1..clock``, in order, each once, the last one ``clock``. A commit that breaks it is
    refused (ValueError) so that a resume never continues from a clock whose records are
    missing; ``allow_missing`` names iterations known to be missing already (a resumed
    checkpoint written before this rule, logged when it was read). ``clock``, ``slot`` and
    ``history`` go into the group's ``zarr.json`` in one write (zarr's local store writes a
    temporary file and renames it; an object store's put is atomic), so a run killed during a
    commit leaves the previous checkpoint or this one, never a mix.
    """
    if not history_valid(history, clock, allow_missing):
        its = [r.get("iteration") for r in history]
        shown = its if len(its) <= 8 else f"{its[:3]}..{its[-3:]} ({len(its)})"
        raise ValueError(f"refusing to commit checkpoint clock {clock}: its history must be "
                         f"the records of iterations 1..{clock}, got {shown}")
    g = zarr.open_group(url, mode="r+")
    update_attributes(g, {"clock": int(clock), "slot": int(slot), "history": list(history),
                          "decided": max(int(clock), _decided(dict(g.attrs)))})


def _decided(attrs: Mapping[str, Any]) -> int:
    """Return the last clock whose checkpoint the driver decided.

    A store written before ``decided`` existed: its committed clock.
    """
    return int(attrs.get("decided", attrs.get("clock", -1)))


def decide(url: str, clock: int) -> None:
    """Record that the driver processed the checkpoint reports of ``clock``.

    Committed or not: workers waiting to write their next checkpoint go on
    (:func:`wait_decided`).
    """
    g = zarr.open_group(url, mode="r+")
    if _decided(dict(g.attrs)) < clock:
        update_attributes(g, {"decided": int(clock)})


def wait_decided(url: str, clock: int, timeout: float, poll: float = 0.02,
                 alive: Callable[[], bool] | None = None, alive_every: float = 0.5
                 ) -> dict[str, Any] | None:
    """Wait up to ``timeout`` s for the driver to decide the checkpoint of ``clock``.

    Return the checkpoint's attributes then (``slot``: the committed one), None on timeout
    or once ``alive()`` (asked every ``alive_every`` s) says the attempt is over: a task the
    driver gave up must not write a checkpoint into a slot the next attempt writes.
    """
    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + alive_every
    while True:
        attrs = dict(zarr.open_group(url, mode="r").attrs)
        if _decided(attrs) >= clock:
            return attrs
        now = time.monotonic()
        if now >= deadline:
            return None
        if alive is not None and now >= next_check:
            if not alive():
                return None
            next_check = now + alive_every
        time.sleep(poll)


def open_checkpoint(url: str, n_topics: int, n_tokens: int) -> dict[str, Any]:
    """Attributes of a committed checkpoint that matches the corpus and K; else a BigLDAError."""
    if not exists(url):
        raise ConfigError(f"cannot resume: no checkpoint at {url}")
    try:
        attrs: dict[str, Any] = dict(zarr.open_group(url, mode="r").attrs)
    except Exception as exc:  # zarr raises several types for "not a group"
        raise FormatError(f"{url}: not a biglda checkpoint ({type(exc).__name__})") from None
    if attrs.get("format") != CHECKPOINT_FORMAT:
        raise FormatError(f"{url}: not a biglda checkpoint")
    if attrs.get("clock", -1) < 0:
        raise ConfigError(f"cannot resume: the checkpoint {url} has no completed clock yet")
    if attrs["n_topics"] != n_topics or attrs["n_tokens"] != n_tokens:
        raise ConfigError(
            f"cannot resume: the checkpoint {url} is for K={attrs['n_topics']} and "
            f"{attrs['n_tokens']} tokens, this run has K={n_topics} and {n_tokens} tokens")
    return attrs


def read_z(url: str, attrs: dict[str, Any], token_start: int, token_stop: int) -> np.ndarray:
    """``z`` of tokens ``[token_start, token_stop)`` from the committed slot (any shard plan)."""
    g: Any = zarr.open_group(url, mode="r")  # zarr's types do not know the members are arrays
    slot = int(attrs["slot"])
    parts = []
    for i, (start, stop) in enumerate(attrs["shards"]):
        lo, hi = max(start, token_start), min(stop, token_stop)
        if lo < hi:
            parts.append(np.asarray(g[f"slot{slot}/{i}"][lo - start:hi - start]))
    z = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)
    if len(z) != token_stop - token_start:
        raise FormatError(f"{url}: checkpoint does not cover tokens [{token_start}, {token_stop})")
    return z


# ----------------------------------------------------------------------------- commits


def latest_checkpoint(url: str | None, n_topics: int, n_tokens: int) -> dict[str, Any] | None:
    """Attributes of the committed checkpoint at ``url``, or None if there is none (yet)."""
    if url is None:
        return None
    try:
        return open_checkpoint(url, n_topics, n_tokens)
    except BigLDAError:
        return None



def iterations_text(history: History) -> str:
    """Name the iterations of ``history`` in a log line (elided when long)."""
    its = [r.get("iteration") for r in history]
    return f"{its}" if len(its) <= 8 else f"{its[:3]}..{its[-3:]} ({len(its)})"



def checked_history(history: History, clock: int, where: str) -> list[Record]:
    """``history`` up to iteration ``clock``; a warning (never a silent gap) if incomplete."""
    kept = history_upto(history, clock)
    missing = history_missing(kept, clock)
    if missing:
        log.warning("%s: the metrics history has no record of iteration(s) %s of 1..%d; the "
                    "model's history will miss them", where, missing, clock)
    return kept



def commit_after_clock(ck_url: str | None, stats: Mapping[int, Mapping[str, Any]], c: int,
                       history: History, rec: Record, n_shards: int | None = None,
                       known_missing: frozenset[int] = frozenset()) -> int | None:
    """Commit the checkpoint of clock ``c + 1`` once every shard reported writing it.

    By construction the committed history is exactly the records of iterations ``1..c + 1``
    (``history`` then ``rec``): a report of any other clock, a shard that did not report, or
    records that do not cover ``1..c + 1`` leave the previous checkpoint committed (the
    shards' next checkpoint, or the recovery, starts from there). ``known_missing``:
    iterations already missing from the history this run resumed from (logged then).
    """
    if ck_url is None:
        return None
    rows = list(stats.values())
    wrote = {tuple(r["checkpoint"]) for r in rows if r.get("checkpoint")}
    got = _commit_reports(ck_url, rows, wrote, c, history, rec, n_shards, known_missing)
    if wrote and got is None:  # (a commit records its decision itself)
        decide(ck_url, c + 1)
    return got


def _commit_reports(ck_url: str, rows: list, wrote: set, c: int, history: History,
                    rec: Record, n_shards: int | None,
                    known_missing: frozenset[int]) -> int | None:
    """:func:`commit_after_clock`'s decision: commit the reported checkpoint or not."""
    if not rows or len(wrote) != 1 or not all(r.get("checkpoint") for r in rows):
        return None
    if n_shards is not None and len(rows) != n_shards:
        log.warning("checkpoint after clock %d not committed: %d of %d shards reported",
                    c, len(rows), n_shards)
        return None
    done, slot = next(iter(wrote))
    if int(done) != c + 1:
        log.warning("checkpoint not committed: the shards' stats of clock %d report a "
                    "checkpoint of clock %s", c, done)
        return None
    stored = history_upto(history_for_store([*history, rec]), done)
    if not history_valid(stored, done, known_missing):
        log.warning("checkpoint of clock %d not committed: the records are of iterations %s",
                    done, iterations_text(stored))
        return None
    commit(ck_url, done, slot, stored, allow_missing=known_missing)
    return int(done)


def commit_final(ck_url: str, notes: dict[int, dict], n_shards: int, clock: int,
                 history: History, known_missing: frozenset[int] = frozenset()) -> None:
    """Commit the checkpoint the shards wrote when the run stopped early at ``clock``.

    That checkpoint is off the checkpoint period; it is committed only if every shard noted
    the same one and the records cover it.
    """
    finals = {tuple(n.get("final_checkpoint", ())) for n in notes.values()}
    if len(notes) != n_shards or len(finals) != 1:
        return
    done, slot = finals.pop()
    stored = history_upto(history_for_store(history), done)
    if int(done) == clock and history_valid(stored, done, known_missing):
        commit(ck_url, done, slot, stored, allow_missing=known_missing)
    else:
        log.warning("final checkpoint of clock %s not committed: the driver is at clock "
                    "%d with the records of iterations %s", done, clock,
                    iterations_text(history))
