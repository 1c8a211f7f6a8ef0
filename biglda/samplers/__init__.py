"""The hot kernels: one sweep of one shard, array in, array out (no Dask, no I/O, no logging).

Public API (see docs/contracts.md, section "samplers"):

- :func:`get_sampler`, :func:`available_samplers`, :func:`register_sampler` — the registry;
  ``sampler.sweep(...) -> SweepResult``.
- :class:`RandomKey` — explicit random streams keyed by (seed, iteration, shard, thread).
- :func:`count_from_z`, :func:`doc_topic_counts`, :func:`init_z`, :func:`z_dtype`.
- :func:`doc_loglik`, :func:`word_loglik_rows`, :func:`word_loglik_topics`,
  :func:`joint_loglik` — log p(w, z) split so a parameter server can add row ranges.
- :func:`fit_local` / :class:`LocalFit` — the training loop in one process.
"""

from biglda.samplers.base import Sampler, SweepResult, combine_sweeps
from biglda.samplers.counts import (
    MAX_TOPICS,
    check_n_topics,
    count_from_z,
    doc_loglik,
    doc_topic_counts,
    init_z,
    joint_loglik,
    word_loglik_rows,
    word_loglik_topics,
    z_dtype,
)
from biglda.samplers.local import LocalFit, fit_local
from biglda.samplers.registry import (
    SamplerParam,
    available_samplers,
    get_sampler,
    parse_sampler_params,
    register_sampler,
    sampler_params,
)
from biglda.samplers.rng import RandomKey

__all__ = [
    "MAX_TOPICS",
    "LocalFit",
    "RandomKey",
    "Sampler",
    "SamplerParam",
    "SweepResult",
    "available_samplers",
    "check_n_topics",
    "combine_sweeps",
    "count_from_z",
    "doc_loglik",
    "doc_topic_counts",
    "fit_local",
    "get_sampler",
    "init_z",
    "joint_loglik",
    "parse_sampler_params",
    "register_sampler",
    "sampler_params",
    "word_loglik_rows",
    "word_loglik_topics",
    "z_dtype",
]
