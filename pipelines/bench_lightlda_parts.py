"""lightlda's one-thread sweep in Q parts of the documents instead of two halves, no Dask.

lightlda (``biglda/samplers/lightlda_cpu.py``) sweeps the documents ``d % 2 == h`` for
``h = 0, 1``, each half against word proposals built from the counts without that half, so
that no token's proposal depends on its own topic (the exactness of the two halves). The
proposals then leave out half of the corpus; in Q parts (``d % Q == q``) they leave out
1/Q of it, so they are nearer the conditional they stand for and more of them are accepted,
at one more build of the word tables a part. This measures that trade on one thread, the
chains taking their sweeps in turn: per Q, the CPU seconds a sweep (median after the first
two), the acceptance rate and the
log-likelihood per token after every ``--every`` sweeps, and how much longer Q = 2 takes
(its CPU a sweep times the sweeps it needs, interpolated) to reach each Q's LL/token there
(">": not within ``--sweeps``)::

    .venv/bin/python pipelines/bench_lightlda_parts.py --corpus runs/synth4m.zarr \\
        --topics 1000 --sweeps 30 --parts 2,3,4,8

Q parts is not in the sampler (an experiment): the kernels for it are the library's own
with their stride of 2 made Q, by a textual change of their source here (the half's sweep
and its token lists; the sweep that calls them is written out here), and Q = 2 is
checked to give the library's chain bit for bit before anything is reported (the change
fails loudly if the kernels' source moves away from what it replaces).
"""

from __future__ import annotations

import argparse
import inspect
import textwrap
import time

import numpy as np
from numba import njit

import biglda.samplers._kernels as kernels
import biglda.samplers.lightlda_cpu as light
from biglda.samplers.rng import _next_float, _next_int


def _with_stride(fn, replacements: list[tuple[str, str]]) -> str:
    src = textwrap.dedent(inspect.getsource(fn.py_func))
    for old, new in replacements:
        if old not in src:
            raise SystemExit(f"bench_lightlda_parts: {fn.__name__}'s source no longer holds "
                             f"{old!r}: update the replacements")
        src = src.replace(old, new)
    return src.replace("@njit(nogil=True, cache=True)\n", "")


def q_sweep_kernel():
    """Return the Q-part sweep ``(Q, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
    state, mh_steps, symmetric) -> (state, accepted, proposed)``, compiled."""
    ns = dict(np=np, _next_float=_next_float, _next_int=_next_int,
              _sample_alias=kernels._sample_alias, _room=kernels._room,
              _sparse_prob=light._sparse_prob, BLOCK_ENTRIES=light.BLOCK_ENTRIES,
              _alpha_tables=light._alpha_tables, _other_tables=light._other_tables)
    exec(_with_stride(light._half_sweep, [
        ("def _half_sweep(tokens", "def _q_sweep(Q, tokens"),
        ("first = d_lo + ((d_lo + half) & 1)", "first = d_lo + ((half - d_lo) % Q)"),
        ("(d_hi - first + 1) // 2))", "(d_hi - first + Q - 1) // Q))"),
        ("d1 = min(d_hi, d0 + 2 * block_docs)", "d1 = min(d_hi, d0 + Q * block_docs)"),
        ("            for d in range(d0, d1, 2):\n                nb +=",
         "            for d in range(d0, d1, Q):\n                nb +="),
        ("for d in range(d0, d1, 2):\n                dl = (d - d0) >> 1\n"
         "                for i in range(doc_ptr[d], doc_ptr[d + 1]):\n                    if",
         "for d in range(d0, d1, Q):\n                dl = (d - d0) // Q\n"
         "                for i in range(doc_ptr[d], doc_ptr[d + 1]):\n                    if"),
        ("lo = doc_ptr[d0 + 2 * (dl - row0)]", "lo = doc_ptr[d0 + Q * (dl - row0)]"),
        ("n_doc = doc_ptr[d0 + 2 * (dl - row0) + 1] - lo",
         "n_doc = doc_ptr[d0 + Q * (dl - row0) + 1] - lo"),
        ("for d in range(d0, d1, 2):  # reset the touched doc-topic counts\n"
         "                dl = (d - d0) >> 1",
         "for d in range(d0, d1, Q):  # reset the touched doc-topic counts\n"
         "                dl = (d - d0) // Q"),
    ]), ns)
    exec(_with_stride(kernels._range_lists, [
        ("def _range_lists(tokens", "def _q_lists(Q, tokens"),
        ("stride = 1 if half < 0 else 2", "stride = 1 if half < 0 else Q"),
        ("first = d_lo if half < 0 else d_lo + ((d_lo + half) & 1)",
         "first = d_lo if half < 0 else d_lo + ((half - d_lo) % Q)"),
    ]), ns)
    q_sweep, q_lists = njit(nogil=True)(ns["_q_sweep"]), njit(nogil=True)(ns["_q_lists"])
    by_word, word_tables = light._by_word, light._word_tables
    alpha_tables, other_tables = light._alpha_tables, light._other_tables

    @njit(nogil=True)
    def q_lightlda(Q, tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words, state, mh_steps,
                   symmetric, no_counts):
        # the library's one-thread sweep (_sweep_with_lists) with Q parts for its 2 halves
        n_topics, n_rows, n_docs = n_k.shape[0], n_wk.shape[0], doc_ptr.shape[0] - 1
        a_sum, a_thr, a_alias, a_prob = alpha_tables(alpha, symmetric)
        one_range = np.zeros(n_rows, dtype=np.int32)  # every word in range 0
        n_accept, n_propose = 0, 0
        for half in range(Q):
            in_half, _, idx = q_lists(Q, tokens, doc_ptr, z, half, 0, n_docs, one_range, 1,
                                      n_topics)
            coef, b_thr, b_alias, b_prob, b_mass = other_tables(n_k - in_half, beta,
                                                                n_words * beta)
            word_ptr, by = by_word(idx, tokens, 0, n_rows)
            w_start, w_mass, w_topic, w_thr, w_alias, w_prob = word_tables(
                word_ptr, by, z, n_wk, coef)
            state, acc, prop, _ = q_sweep(
                Q, tokens, doc_ptr, z, n_wk, n_k, alpha, a_sum, beta, n_words, state,
                mh_steps, symmetric, a_thr, a_alias, a_prob, b_thr, b_alias, b_prob, b_mass,
                w_start, w_mass, w_topic, w_thr, w_alias, w_prob, half, 0, n_docs, 0, n_rows,
                False, no_counts, np.zeros(0, dtype=np.int64))
            n_accept += acc
            n_propose += prop
        return state, n_accept, n_propose

    return q_lightlda


def run(sweeps: dict, tokens, doc_ptr, n_words, n_topics, n_sweeps) -> dict:
    """Per chain (``sweeps``: name -> sweep function), from seed 0's topics: CPU s, acceptance
    rate and LL/token after each sweep, and the final z: ``{name: (cpu, acc, ll, z)}``.

    The chains take their sweeps in turn (a sweep of each, then the next), so a change in
    the machine's speed falls on all of them alike.
    """
    from biglda.samplers import RandomKey, count_from_z, init_z, joint_loglik

    alpha, beta = np.full(n_topics, 0.1), 0.01
    state = {}
    for name in sweeps:
        z = init_z(len(tokens), n_topics, RandomKey(0, -1))
        state[name] = (z, *count_from_z(tokens, doc_ptr, z, n_words, n_topics), [], [], [])
    for it in range(n_sweeps):
        for name, sweep in sweeps.items():
            z, n_wk, n_k, cpu, acc, ll = state[name]
            c0 = time.process_time()
            _, a, p = sweep(tokens, doc_ptr, z, n_wk, n_k, alpha, beta, n_words,
                            RandomKey(0, it).state(), 2, True, light._no_doc_counts(doc_ptr))
            cpu.append(time.process_time() - c0)
            acc.append(a / p)
            ll.append(joint_loglik(doc_ptr, z, n_wk, n_k, alpha, beta, n_words) / len(tokens))
    return {name: (cpu, acc, ll, z) for name, (z, _, _, cpu, acc, ll) in state.items()}


def main(argv: list[str] | None = None) -> int:
    from biglda.corpus import Corpus
    from biglda.trainer.layout import seconds_to

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--sweeps", type=int, default=12)
    ap.add_argument("--parts", default="2,3,4,8")
    ap.add_argument("--every", type=int, default=10,
                    help="report the LL and the time ratio after every this many sweeps")
    args = ap.parse_args(argv)
    corpus = Corpus.open(args.corpus)
    doc_ptr = np.asarray(corpus.doc_ptr, dtype=np.int64)
    tokens = np.asarray(corpus.read_tokens(0, int(doc_ptr[-1]))).astype(np.int32)
    q_sweep = q_sweep_kernel()
    parts = sorted({2, *(int(x) for x in args.parts.split(","))})
    chains = {q: (lambda *a, q=q: q_sweep(q, *a)) for q in parts}
    chains["library"] = light._lightlda_sweep
    got = run(chains, tokens, doc_ptr, corpus.n_words, args.topics, args.sweeps)
    if not np.array_equal(got["library"][3], got[2][3]):
        raise SystemExit("bench_lightlda_parts: Q = 2 is not the library's chain")
    print(f"{len(tokens):,} tokens, K = {args.topics}, one thread; Q = 2 is the library's "
          f"chain bit for bit\n")
    marks = [n for n in range(args.every, args.sweeps + 1, args.every)] or [args.sweeps]
    print("| parts Q | CPU s a sweep | acceptance (last) | LL/token after "
          + ", ".join(map(str, marks)) + " | Q = 2's time to that LL against Q's |\n"
          "|---|---|---|---|---|")
    base_cpu = float(np.median(got[2][0][2:] or got[2][0]))
    for q in parts:
        cpu, acc, ll, _ = got[q]
        c = float(np.median(cpu[2:] or cpu))
        ratios = []
        for n in marks:  # (sweeps counted from 1: seconds_to counts from the first point)
            after = seconds_to(list(enumerate(got[2][2], 1)), ll[n - 1])
            need = None if after is None else 1 + after
            ratios.append(f"> {args.sweeps * base_cpu / (n * c):.2f}x" if need is None
                          else f"{need * base_cpu / (n * c):.2f}x")
        print(f"| {q} | {c:.3f} | {acc[-1]:.3f} | "
              + ", ".join(f"{ll[n - 1]:.4f}" for n in marks) + " | " + ", ".join(ratios)
              + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
