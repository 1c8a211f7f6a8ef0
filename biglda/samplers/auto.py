"""``sampler="auto"``: which sampler (and settings) a run gets, from K, the corpus and backend.

The rule (measured on the Debian corpus with ``pipelines/auto_rule.py``: held-out LL per
token at equal CPU time, one thread; figures and commands in ``docs/samplers.md``):

- on a GPU (any worker runs the GPU backend, so every worker must run a sampler the GPU has):
  ``cgs`` for K < :data:`LARGE_K`, else ``lightlda`` (O(1) per token; the GPU has no warplda;
  this branch follows the CPU threshold and was not measured on a GPU);
- a corpus of fewer than :data:`SMALL_CORPUS` tokens: ``cgs`` at any K on CPU (a sweep takes
  milliseconds whatever the sampler, so the exact one costs nothing there: a judgement,
  not a measurement);
- on CPU, K >= :data:`LARGE_K`: ``warplda`` -- at K = 300 and 1,000 it leads ``cgs`` by 0.16
  and 0.40 nats/token after 12 CPU s (10 M tokens/s against 2.6 and 1.3 M);
- on CPU, K < :data:`LARGE_K`: ``cgs`` (SparseLDA, exact) -- at K = 50 and 100 warplda
  leads early, but the gap halves with every doubling of the time (K = 100: 0.27, 0.17,
  0.08, 0.015 nats after 3, 6, 12, 25 CPU s; cgs ahead by 0.002 at 50 CPU s), so over a run
  of the default length (100 sweeps: ~35 CPU s here) the exact sampler is level or ahead.
  ``--sampler warplda`` is the faster choice for short runs there.

:data:`LARGE_K` = 200 lies between the measured K = 100 (cgs) and K = 300 (warplda). Mean
document length and V enter the reason line but not the rule: it names no term it was not
measured on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: K from which the O(1)-per-token samplers are chosen (see the module docstring).
LARGE_K = 200
#: Below this many tokens cgs is chosen at any K on CPU.
SMALL_CORPUS = 100_000


class SamplerChoice(NamedTuple):
    """What ``auto`` chose: the sampler, its settings and the reason in one line."""

    sampler: str
    params: dict[str, Any]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """Return the model's ``sampler_choice`` attribute and the start record's entry."""
        return {"sampler": self.sampler, "params": dict(self.params), "reason": self.reason}


def choose_sampler(n_topics: int, n_tokens: int, n_docs: int, n_words: int,
                   backends: Any = ("cpu",)) -> SamplerChoice:
    """Pick the sampler ``auto`` uses for K = ``n_topics`` on a corpus, given the backends.

    Parameters
    ----------
    n_topics : int
        K.
    n_tokens, n_docs, n_words : int
        The corpus (tokens, documents, vocabulary size V).
    backends : iterable of {"cpu", "gpu"}
        What the workers run (:func:`biglda.trainer.placement.plan_backends`' values).

    Examples
    --------
    >>> choose_sampler(1000, 2_400_000, 62_000, 18_800).sampler
    'warplda'
    >>> choose_sampler(100, 2_400_000, 62_000, 18_800).sampler
    'cgs'
    >>> choose_sampler(1000, 2_400_000, 62_000, 18_800, backends=["gpu"]).sampler
    'lightlda'
    """
    k, n = int(n_topics), int(n_tokens)
    mean_len = n / max(int(n_docs), 1)
    corpus = f"{n:,} tokens, {mean_len:.0f} per doc, V={int(n_words):,}"
    if "gpu" in set(backends):
        if k >= LARGE_K:
            return SamplerChoice("lightlda", {}, f"K={k} >= {LARGE_K} on a GPU worker: O(1) "
                                                 f"per token; the GPU has no warplda ({corpus})")
        return SamplerChoice("cgs", {}, f"K={k} < {LARGE_K} on a GPU worker: the exact "
                                        f"sparse sampler ({corpus})")
    if n < SMALL_CORPUS:
        return SamplerChoice("cgs", {}, f"small corpus ({corpus} < {SMALL_CORPUS:,} tokens): "
                                        f"the exact sampler costs nothing there")
    if k >= LARGE_K:
        return SamplerChoice("warplda", {}, f"K={k} >= {LARGE_K} on CPU: O(1) per token, "
                                            f"fastest to a given held-out LL ({corpus})")
    return SamplerChoice("cgs", {}, f"K={k} < {LARGE_K} on CPU: the exact sparse sampler "
                                    f"is level with warplda after ~25 CPU s and exact ({corpus})")
