"""Clients of the parameter server: the only code that names an actor method.

Workers and the driver hold a :class:`PSClient` — four small clients, one per role:

* :class:`TableClient` — the table-shard actors (:class:`biglda.ps.table.TableShard`): push,
  attach, pull, and the read-outs (log-likelihood snapshots, top words, the table, counters).
* :class:`ClockClient` — the SSP clock: wait to start a clock, tick, stop, abort, read-outs.
* :class:`AlphaClient` — the alpha broker: publish (driver), look up (shards).
* :class:`MailboxClient` — the per-clock statistics mailbox and the shards' notes.

Every call goes through :mod:`biglda.ps.calls` (a timeout and one clear ``ClusterError``).
Waits are a sequence of short server-side waits (``chunk`` seconds each), so a lost clock actor
surfaces within ``chunk + timeout``; the ``WAIT`` answer never leaves this module. A client
holds only actor handles and the row bounds, so it pickles (it travels inside the worker task
spec) and works on any process of the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from biglda.ps.calls import call, call_all, same_process
from biglda.ps.protocol import ClockAnswer

Check = Callable[[], None] | None


@dataclass(frozen=True, eq=False)
class TableClient:
    """The table-shard actors and their row bounds.

    Parameters
    ----------
    actors : tuple
        One :class:`biglda.ps.table.TableShard` actor handle per row range.
    bounds : numpy.ndarray
        int64 [len(actors) + 1] row boundaries: actor ``a`` holds rows
        ``[bounds[a], bounds[a + 1])``.

    Examples
    --------
    >>> tables = TableClient((), np.array([0]))
    >>> tables.n_parts
    0
    """

    actors: tuple[Any, ...]
    bounds: np.ndarray

    @property
    def n_parts(self) -> int:
        """Number of table shards."""
        return len(self.actors)

    def in_this_process(self) -> TableClient:
        """Return this client calling the table shards of this worker process directly.

        (:func:`biglda.ps.calls.same_process`: no pickling, no loopback round trip.)
        """
        return TableClient(tuple(same_process(a) for a in self.actors), self.bounds)

    def push(self, shard: int, clock: int, parts: Sequence[tuple[np.ndarray, ...]],
             timeout: float, log: bool = True) -> None:
        """Send shard ``shard``'s delta of ``clock`` to every table shard, all calls at once.

        One ``(words, topics, counts)`` part per table shard (global word ids).

        ``log=False``: the initial recount (applied, not logged for pulls).
        """
        call_all(self.send_push(shard, clock, parts, log), timeout,
                 f"shard {shard}: push of clock {clock}")

    def send_push(self, shard: int, clock: int, parts: Sequence[tuple[np.ndarray, ...]],
                  log: bool = True) -> list[Any]:
        """:meth:`push`'s calls, sent; their futures (:func:`~biglda.ps.calls.call_all`)."""
        return [actor.push(shard, clock, w, t, c, log=log)
                for actor, (w, t, c) in zip(self.actors, parts, strict=True)]

    def push_advance(self, shard: int, clock: int, parts: Sequence[tuple[np.ndarray, ...]],
                     upto: int, timeout: float) -> list[np.ndarray]:
        """:meth:`push` and :meth:`advance` to ``upto`` in one call per table shard.

        (:meth:`biglda.ps.table.TableShard.push_advance`.) Returns ``received`` per table
        shard.
        """
        return call_all(self.send_push_advance(shard, clock, parts, upto), timeout,
                        f"shard {shard}: push of clock {clock}, advance to {upto}")

    def send_push_advance(self, shard: int, clock: int,
                          parts: Sequence[tuple[np.ndarray, ...]], upto: int) -> list[Any]:
        """:meth:`push_advance`'s calls, sent; their futures (each answers ``received``)."""
        return [actor.push_advance(shard, clock, w, t, c, int(upto))
                for actor, (w, t, c) in zip(self.actors, parts, strict=True)]

    def push_to(self, part: int, shard: int, clock: int, words: np.ndarray,
                topics: np.ndarray, counts: np.ndarray, timeout: float, log: bool = True
                ) -> bool:
        """Push one delta to table shard ``part`` only; False if it was a repeat (ignored)."""
        return call(self.actors[part].push(shard, clock, words, topics, counts, log=log),
                    timeout, f"shard {shard}: push of clock {clock} to table shard {part}")

    def attach(self, shard: int, vocab_parts: Sequence[np.ndarray], upto: int, timeout: float,
               members: Sequence[int] = ()) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Register shard ``shard``'s vocabulary and get its rows as of clock ``upto``.

        The vocabulary comes as one part per table shard (global ids); the rows come as
        ``(rows, n_k part, received)`` per table shard. ``members``: the other shards it reads
        for (a process cache).
        """
        members = tuple(int(m) for m in members)
        futs = [actor.attach(shard, words, upto, members)
                for actor, words in zip(self.actors, vocab_parts, strict=True)]
        return call_all(futs, timeout, f"shard {shard}: attach")

    def pull(self, shard: int, received: Sequence[np.ndarray], upto: int, timeout: float
             ) -> list[tuple[np.ndarray, ...]]:
        """Pull other shards' merged deltas of clocks in ``(received, upto]``.

        Only shard ``shard``'s rows; ``(received', words, topics, counts, dk)`` per table shard.
        """
        futs = [actor.pull(shard, got, upto)
                for actor, got in zip(self.actors, received, strict=True)]
        return call_all(futs, timeout, f"shard {shard}: pull")

    def offer(self, shard: int, clock: int, parts: Sequence[tuple[np.ndarray, ...]],
              timeout: float) -> None:
        """Send early updates of shard ``shard``'s ``clock`` (managed communication).

        One ``(words, topics, counts)`` part per table shard (global ids); empty parts are not
        sent.
        """
        futs = [actor.offer(shard, clock, w, t, c)
                for actor, (w, t, c) in zip(self.actors, parts, strict=True) if len(w)]
        if futs:
            call_all(futs, timeout, f"shard {shard}: early updates of clock {clock}")

    def offers(self, shard: int, got: Sequence[np.ndarray], received: Sequence[np.ndarray],
               timeout: float) -> list[tuple[np.ndarray, ...]]:
        """Other writers' early updates the reader lacks (managed communication).

        ``got``: per table shard, int64 [n_shards, 2] (clock, number) of the offers it has;
        ``received``: its pull state per table shard. Returns ``(got', writers, words,
        topics, counts)`` per table shard (:meth:`biglda.ps.table.TableShard.offers`).
        """
        futs = [actor.offers(shard, g, r)
                for actor, g, r in zip(self.actors, got, received, strict=True)]
        return call_all(futs, timeout, f"shard {shard}: early updates")

    def mailbox(self, window: int) -> int:
        """Return the table shard that keeps the steps' moves on ``window`` (its mailbox)."""
        return int(window) % len(self.actors)

    def send_step(self, shard: int, clock: int, window: int, step: int, words: np.ndarray,
                  topics: np.ndarray, counts: np.ndarray) -> Any:
        """Send writer ``shard``'s moves of ``step`` on ``window`` (global ids) to its mailbox.

        :meth:`biglda.ps.table.TableShard.post_step`: one call, to one table shard. Returns
        the call's future without waiting for it (:meth:`post_step` waits).
        """
        actor = self.actors[self.mailbox(window)]
        return actor.post_step(shard, clock, window, step, words, topics, counts)

    def post_step(self, shard: int, clock: int, window: int, step: int, words: np.ndarray,
                  topics: np.ndarray, counts: np.ndarray, timeout: float) -> None:
        """:meth:`send_step` and wait for the mailbox's answer."""
        call(self.send_step(shard, clock, window, step, words, topics, counts), timeout,
             f"shard {shard}: step {step} of clock {clock}")

    def ask_window_steps(self, window: int, steps: Sequence[tuple[int, int]], wait: float
                         ) -> Any:
        """Ask for :meth:`window_steps` now; returns the call's future (its answer the same).

        A reader asks before it sweeps the step before, so the answer comes while it sweeps.
        """
        actor = self.actors[self.mailbox(window)]
        return actor.window_steps(window, [(int(c), int(s)) for c, s in steps], wait)

    def window_steps(self, window: int, steps: Sequence[tuple[int, int]], wait: float,
                     timeout: float, asked: Any = None
                     ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] | None:
        """Return the posts of ``steps`` (``(clock, step)``) on ``window`` (None: not yet).

        :meth:`biglda.ps.table.TableShard.window_steps`: the actor waits up to ``wait`` s for
        them (no polling). ``asked``: the future of an :meth:`ask_window_steps` of the same
        steps made earlier, whose answer this takes instead of asking again.
        """
        if asked is None:
            asked = self.ask_window_steps(window, steps, wait)
        return call(asked, timeout + wait, f"the steps {list(steps)} on words' range {window}")

    def advance(self, shard: int, upto: int, timeout: float) -> list[np.ndarray]:
        """Tell every table shard that shard ``shard`` has every delta up to ``upto``.

        :meth:`biglda.ps.table.TableShard.advance` (processes taking turns: a pull that
        brings nothing). Returns ``received`` per table shard.
        """
        return call_all([a.advance(shard, upto) for a in self.actors], timeout,
                        f"shard {shard}: advance to clock {upto}")

    def snapshots(self, clock: int, timeout: float, check: Check = None
                  ) -> list[tuple[float, np.ndarray] | None]:
        """Return each table shard's ``(row_ll, n_k part)`` after every push of ``clock``.

        As of the moment every push of ``clock`` had arrived; None where there is none
        within ``timeout``. A process may tick a clock before its push has arrived (its
        push's answer waits to the next clock's: :meth:`biglda.ps.ShardCache.settle`), so a
        missing snapshot is asked for again, from the table shards that had none, every few
        ms (``check`` once a second between the asks, as :func:`~biglda.ps.calls.call`).
        """
        start = time.monotonic()
        deadline, checked = start + timeout, start
        got: list[tuple[float, np.ndarray] | None] = [None] * len(self.actors)
        pause = 0.001
        while True:
            missing = [i for i, g in enumerate(got) if g is None]
            answers = call_all([self.actors[i].snapshot(clock) for i in missing],
                               max(0.001, deadline - time.monotonic()), "log-lik", check=check)
            for i, answer in zip(missing, answers, strict=True):
                got[i] = answer
            now = time.monotonic()
            if all(g is not None for g in got) or now + pause > deadline:
                return got
            if check is not None and now - checked >= 1.0:
                check()
                checked = now
            time.sleep(pause)
            pause = min(2 * pause, 0.02)

    def top_words(self, n: int, timeout: float) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each table shard's ``n`` largest rows per topic: ``(global word ids, counts)``."""
        return call_all([a.top_words(n) for a in self.actors], timeout, "top words")

    def parts(self, timeout: float) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Each table shard's ``(row_start, n_wk rows, n_k part)`` (the final model, tests)."""
        return call_all([a.table() for a in self.actors], timeout, "gather table")

    def info(self, timeout: float) -> list[dict[str, Any]]:
        """Each table shard's counters (bytes, pushes applied and ignored, log length)."""
        return call_all([a.info() for a in self.actors], timeout, "ps info")


@dataclass(frozen=True, eq=False)
class ClockClient:
    """The SSP clock of a run (the :class:`biglda.ps.clock.ClockServer` actor).

    Examples
    --------
    >>> ClockClient(actor=None).actor is None
    True
    """

    actor: Any

    def in_this_process(self) -> ClockClient:
        """Return this client calling the clock directly where it lives in this worker process.

        (:func:`biglda.ps.calls.same_process`: its coroutines run on this worker's event loop
        without pickling or a loopback round trip; a tick or wait elsewhere is unchanged.)
        """
        return ClockClient(same_process(self.actor))

    def wait(self, shard: int, clock: int, chunk: float, timeout: float) -> ClockAnswer:
        """Block until shard ``shard`` may start ``clock``: ``GO``, ``STOP`` or ``ABORT``.

        Each server-side wait lasts at most ``chunk`` seconds; a call without an answer
        within ``chunk + timeout`` is a :class:`biglda.errors.ClusterError`.
        """
        while True:
            answer = call(self.actor.wait(shard, clock, timeout=chunk), chunk + timeout,
                          f"shard {shard}: waiting for clock {clock}")
            if answer is not ClockAnswer.WAIT:
                return ClockAnswer(answer)

    def wait_many(self, shards: Sequence[int], clock: int, chunk: float, timeout: float
                  ) -> ClockAnswer:
        """:meth:`wait` for all of a worker process's shards, in one call per chunk."""
        shards = [int(s) for s in shards]
        while True:
            answer = call(self.actor.wait_many(shards, clock, timeout=chunk), chunk + timeout,
                          f"shards {shards[0]}..{shards[-1]}: waiting for clock {clock}")
            if answer is not ClockAnswer.WAIT:
                return ClockAnswer(answer)

    def tick_many(self, completed: int, stats: Mapping[int, Mapping[str, Any]],
                  timeout: float) -> None:
        """:meth:`tick` for every shard in ``stats`` ({shard: its stats}), in one call."""
        call(self.actor.tick_many(completed, {int(k): v for k, v in stats.items()}), timeout,
             f"shards {min(stats)}..{max(stats)}: clock tick")

    def tick_wait(self, completed: int, stats: Mapping[int, Mapping[str, Any]],
                  chunk: float, timeout: float) -> ClockAnswer:
        """:meth:`tick_many`, then :meth:`wait_many` for clock ``completed``, in one call.

        The shards are those of ``stats``; the first chunk of the wait is in the tick's call
        (between two clocks a process made two round trips), later ones as :meth:`wait_many`.
        """
        shards = sorted(int(k) for k in stats)
        answer = call(self.actor.tick_wait(completed, {int(k): v for k, v in stats.items()},
                                           timeout=chunk), chunk + timeout,
                      f"shards {shards[0]}..{shards[-1]}: clock tick")
        if answer is not ClockAnswer.WAIT:
            return ClockAnswer(answer)
        return self.wait_many(shards, completed, chunk, timeout)

    def tick(self, shard: int, completed: int, stats: Mapping[str, Any] | None,
             timeout: float) -> None:
        """Report that shard ``shard`` finished ``completed`` sweeps (its pushes are done).

        ``stats`` go to the mailbox as its statistics of clock ``completed - 1``.
        """
        call(self.actor.tick(shard, completed, stats), timeout, f"shard {shard}: clock tick")

    def send_totals(self, clock: int, writer: int, dk: np.ndarray) -> Any:
        """Post process ``writer``'s change of ``n_k`` in ``clock``; the call's future.

        (:class:`biglda.ps.rules.TotalsBoard`: processes taking turns.)
        """
        return self.actor.totals_post(int(clock), int(writer), np.asarray(dk, np.int64))

    def ask_totals(self, clock: int, n: int, wait: float) -> Any:
        """Ask for :meth:`totals` now; returns the call's future."""
        return self.actor.totals(int(clock), int(n), timeout=wait)

    def send_ask_totals(self, clock: int, writer: int, dk: np.ndarray, n: int, wait: float
                        ) -> Any:
        """:meth:`send_totals` and :meth:`ask_totals` of the same clock in one call.

        The future answers as :meth:`ask_totals`' (pass it to :meth:`totals`); a failed post
        shows there.
        """
        return self.actor.totals_post_ask(int(clock), int(writer), np.asarray(dk, np.int64),
                                          int(n), timeout=wait)

    def totals(self, clock: int, n: int, wait: float, timeout: float, asked: Any = None
               ) -> np.ndarray | None:
        """Return the sum of ``n`` processes' changes of ``n_k`` in ``clock`` (None: not yet).

        The actor waits up to ``wait`` s for them. ``asked``: an :meth:`ask_totals` future.
        """
        if asked is None:
            asked = self.ask_totals(clock, n, wait)
        got = call(asked, timeout + wait, f"the changes of n_k in clock {clock}")
        return None if got is None else np.asarray(got, dtype=np.int64)

    def stop(self, timeout: float, at: int | None = None) -> int:
        """Stop every shard before clock ``at`` (None: as soon as possible); the stop clock."""
        return call(self.actor.stop(at), timeout, "stop")

    def abort(self, timeout: float) -> None:
        """Give the attempt up: every shard's next wait answers ``ABORT``."""
        call(self.actor.abort(), timeout, "abort")

    def clocks(self, timeout: float, check: Check = None) -> list[int]:
        """Completed clocks of every shard."""
        return call(self.actor.clocks(), timeout, "clocks", check=check)

    def state(self, timeout: float) -> dict[str, Any]:
        """``completed``, ``stop_at``, recorded ``starts`` and ``ticks``, ``staleness``."""
        return call(self.actor.state(), timeout, "clock state")


@dataclass(frozen=True, eq=False)
class AlphaClient:
    """The alpha broker: the driver publishes an optimized alpha, shards look it up.

    Examples
    --------
    >>> AlphaClient(actor=None).actor is None
    True
    """

    actor: Any

    def publish(self, clock: int, alpha: Any, timeout: float, check: Check = None) -> None:
        """Publish ``alpha`` for the clocks from ``clock`` on (before any shard may start it)."""
        call(self.actor.alpha_publish(clock, alpha), timeout, "set alpha", check=check)

    def lookup(self, shard: int, clock: int, need: bool, chunk: float, timeout: float
               ) -> tuple[ClockAnswer, tuple[int, Any] | None]:
        """Look up the alpha for shard ``shard`` at ``clock``.

        Returns ``(GO, (from_clock, alpha) or None)``, or ``(STOP, None)`` / ``(ABORT, None)``.

        ``need``: wait until one published for ``clock`` or later is there
        (:func:`biglda.ps.rules.alpha_answer`), in server-side waits of ``chunk`` seconds.
        """
        while True:
            answer, got = call(self.actor.alpha_lookup(clock, need, timeout=chunk),
                               chunk + timeout,
                               f"shard {shard}: waiting for the alpha of clock {clock}")
            if answer is not ClockAnswer.WAIT:
                return ClockAnswer(answer), got


@dataclass(frozen=True, eq=False)
class MailboxClient:
    """The per-clock statistics the shards send with their ticks, and their notes.

    Examples
    --------
    >>> MailboxClient(actor=None).actor is None
    True
    """

    actor: Any

    def iteration(self, clock: int, poll: float, timeout: float, check: Check = None
                  ) -> tuple[dict[int, dict], list[int]] | None:
        """Every shard's statistics of ``clock`` once all finished it; None after ``poll`` s.

        With them, the completed clocks of every shard at that moment (what
        :meth:`ClockClient.clocks` answers): one actor call a clock for the driver, not two.
        """
        got = call(self.actor.mailbox_collect(clock, timeout=poll),
                   poll + timeout, "waiting for the shards", check=check)
        return None if got is None else (got[0], list(got[1]))

    def note(self, shard: int, info: dict, timeout: float) -> None:
        """Keep (update) shard ``shard``'s note, e.g. where it wrote its final checkpoint."""
        call(self.actor.mailbox_note(shard, info), timeout, f"shard {shard}: clock note")

    def notes(self, timeout: float) -> dict[int, dict]:
        """Every shard's note."""
        return call(self.actor.mailbox_notes(), timeout, "notes")


@dataclass(frozen=True, eq=False)
class PSClient:
    """Everything a worker or the driver needs to talk to a running parameter server.

    Picklable (actor handles pickle): it travels inside the worker task spec.

    Parameters
    ----------
    tables : TableClient
    clock : ClockClient
    alpha : AlphaClient
    mailbox : MailboxClient

    Examples
    --------
    >>> ps = PSClient.from_actors((), np.array([0]), None)
    >>> ps.bounds.tolist(), ps.clock.actor is ps.alpha.actor is ps.mailbox.actor
    ([0], True)
    """

    tables: TableClient
    clock: ClockClient
    alpha: AlphaClient
    mailbox: MailboxClient

    @classmethod
    def from_actors(cls, tables: Sequence[Any], bounds: np.ndarray, clock: Any) -> PSClient:
        """Build the client of table-shard actors ``tables`` (row ``bounds``) and a clock actor."""
        return cls(tables=TableClient(tuple(tables), np.asarray(bounds, dtype=np.int64)),
                   clock=ClockClient(clock), alpha=AlphaClient(clock),
                   mailbox=MailboxClient(clock))

    @property
    def bounds(self) -> np.ndarray:
        """int64 row boundaries of the table shards."""
        return self.tables.bounds

    def in_this_process(self) -> PSClient:
        """Return this client calling the actors of this worker process without the comm.

        The table shards on their actor thread, the clock (also the alpha broker and the
        mailbox: one actor) on the event loop; the others through Dask as before.
        """
        clock = self.clock.in_this_process()
        return PSClient(tables=self.tables.in_this_process(), clock=clock,
                        alpha=AlphaClient(clock.actor), mailbox=MailboxClient(clock.actor))
