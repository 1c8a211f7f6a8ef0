"""``sampler="auto"``: which sampler (and settings) a run gets, from K, the corpus and backend.

The rule (measured on the Debian corpus; figures and commands in ``docs/samplers.md``):

- on a GPU (any worker runs the GPU backend, so every worker must run a sampler the GPU has):
  ``cgs`` for K < :data:`LARGE_K`, else ``lightlda`` (O(1) per token; the GPU has no warplda);
- on CPU, K >= :data:`LARGE_K`: ``warplda`` -- O(1) per token with no tables, several times
  the exact sampler's tokens/s there, and ahead of it in held-out LL at equal wall time;
- on CPU, K < :data:`LARGE_K`: ``cgs`` (SparseLDA) -- at small K its cost per token (the
  non-zeros of the word's row) is as low as an O(1) sampler's, and, exact, it mixes faster per
  second than warplda's delayed updates;
- a corpus of fewer than :data:`SMALL_CORPUS` tokens: ``cgs`` at any K on CPU (a sweep takes
  milliseconds whatever the sampler: the exact one costs nothing there).

The corpus enters through K's threshold only by its size today: the measurements behind the
rule found no effect of mean document length or V that would change the choice on the corpora
measured, and the rule names no term it was not measured on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: K from which the O(1)-per-token samplers are chosen (see the module docstring).
LARGE_K = 300
#: Below this many tokens cgs is chosen at any K on CPU.
SMALL_CORPUS = 100_000


class SamplerChoice(NamedTuple):
    """What ``auto`` chose: the sampler, its settings and the reason in one line."""

    sampler: str
    params: dict[str, Any]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The model's ``sampler_choice`` attribute and the start record's entry."""
        return {"sampler": self.sampler, "params": dict(self.params), "reason": self.reason}


def choose_sampler(n_topics: int, n_tokens: int, n_docs: int, n_words: int,
                   backends: Any = ("cpu",)) -> SamplerChoice:
    """The sampler ``auto`` picks for K = ``n_topics`` on a corpus, given the workers' backends.

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
    >>> choose_sampler(50, 2_400_000, 62_000, 18_800).sampler
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
                                    f"mixes fastest per second at small K ({corpus})")
