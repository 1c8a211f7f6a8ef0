"""``biglda report``: a self-contained HTML report of a finished run (no server needed).

Everything comes from the ``model.zarr`` store (format in
:mod:`biglda.model.store`): the per-iteration metrics in ``attrs["history"]``,
``attrs["config"]``, ``attrs["evaluations"]`` (one per test corpus) and
``attrs["evaluation"]`` (the last) when ``biglda evaluate --save`` stored them,
``n_wk``/``n_k`` for topic sizes and top words. Bokeh's JavaScript is inlined
(``bokeh.resources.INLINE``), so the file opens offline, from e-mail or a CI artifact.
"""

from __future__ import annotations

import contextlib
import html
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from bokeh.embed import file_html
from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter
from bokeh.resources import INLINE

from dashboards.figures import RunPanels, config_table_html, panel_figure
from dashboards.records import RunSeries, format_seconds, short_worker

#: Words per topic in the report's table.
TOP_N = 15
#: Rows of ``n_wk`` read at a time when looking for top words (bounded memory).
_ROW_BLOCK = 65536

_TEMPLATE = """
{% block postamble %}
<style>
  body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 24px 40px;
         color: #222; display: block; height: auto; }
  h1 { font-size: 20pt; margin: 18px 0 4px; }
  h2 { font-size: 14pt; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
  .sub { color: #666; margin-bottom: 12px; }
  table.data { border-collapse: collapse; font-size: 10pt; }
  table.data td, table.data th { padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
  table.data tr:nth-child(even) { background: #f5f5f5; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .facts span { margin-right: 20px; }
  .facts b { font-variant-numeric: tabular-nums; }
  .note { color: #777; font-style: italic; }
</style>
{% endblock %}
{% block contents %}
{{ header }}
<h2>Convergence and throughput</h2>
{% if has_history %}{{ embed(roots.biglda_grid) }}{% else %}
<p class="note">This model carries no training history (attrs["history"] is empty).</p>{% endif %}
<h2>Throughput per worker</h2>
{{ workers }}
<h2>Topics</h2>
{{ embed(roots.biglda_sizes) }}
{{ topics }}
<h2>Configuration</h2>
{{ config }}
<h2>Evaluation</h2>
{{ evaluations }}
{{ evaluation }}
{% for name in eval_roots %}{{ embed(roots[name]) }}{% endfor %}
{% endblock %}
"""


def write_report(model: str, out: str, *, top_n: int = TOP_N) -> str:
    """Write the HTML report of the model store ``model`` to ``out``; returns ``out``.

    Parameters
    ----------
    model : str
        Path or fsspec URL of a ``model.zarr`` written by ``biglda train``.
    out : str
        Local path of the HTML file to write (replaced if it exists; written to a temporary
        sibling and moved into place, so a failure leaves nothing half-written).
    top_n : int
        Words shown per topic.

    Raises
    ------
    biglda.errors.FormatError
        When ``model`` is not a biglda model store.

    Examples
    --------
    >>> write_report("runs/demo/model.zarr", "report.html")  # doctest: +SKIP
    'report.html'
    """
    from biglda.model.store import open_model_group

    g = open_model_group(model)
    attrs = dict(g.attrs)
    history = [r for r in attrs.get("history") or [] if isinstance(r, dict)]
    n_k = np.asarray(g["n_k"][:], dtype=np.int64)
    vocab = g["vocab"][:]  # StringDType under zarr 3: index it, do not cast it
    top_ids = top_word_ids(g["n_wk"], top_n)
    top_words = [[str(vocab[i]) for i in row] for row in top_ids]
    total = max(int(n_k.sum()), 1)
    sizes = [float(c) / total for c in n_k]

    config = {"sampler": attrs.get("sampler") or "", **dict(attrs.get("config") or {})}
    run = RunSeries(run_id=str(history[0].get("run_id", "")) if history else "",
                    start={"type": "start", "config": config, "out": model,
                           "corpus": attrs.get("corpus", "")})
    for r in history:
        run.add({**r, "type": "iteration", "top_words": None})
    run.top_words = top_words

    panels = RunPanels()
    panels.set_run(run, sizes)
    grid = panels.grid(only_shown=True)  # the panel table, less what this run lacks
    grid.name = "biglda_grid"
    sizes_fig = topic_sizes_figure(sizes, top_words)
    sizes_fig.name = "biglda_sizes"
    evaluation = attrs.get("evaluation") or {}
    eval_figs = evaluation_figures(evaluation, len(n_k))
    roots = [grid, sizes_fig, *eval_figs]

    html_text = file_html(
        roots, INLINE, title=f"biglda report: {os.path.basename(model.rstrip('/'))}",
        template=_TEMPLATE,
        template_variables={
            "header": _header_html(model, attrs, history),
            "has_history": bool(history),
            "workers": _workers_html(history),
            "topics": _topics_html(top_words, sizes, _per_topic(evaluation, "npmi_per_topic",
                                                                len(n_k))),
            "config": _config_html(attrs),
            "evaluations": _evaluations_html(attrs.get("evaluations") or {}),
            "evaluation": _evaluation_html(evaluation, model),
            "eval_roots": [f.name for f in eval_figs],
        },
    )
    _write_atomic(out, html_text)
    return out


def _write_atomic(out: str, text: str) -> None:
    """Write ``text`` to a temporary sibling of ``out`` and move it into place."""
    from biglda.errors import BigLDAError

    tmp = os.path.join(os.path.dirname(os.path.abspath(out)),
                       f".{os.path.basename(out)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise BigLDAError(f"cannot write {out}: {exc.strerror or type(exc).__name__}") from None


# --------------------------------------------------------------------------- model numbers


def top_word_ids(n_wk: Any, top_n: int) -> np.ndarray:
    """int64 [K, min(top_n, V)]: each topic's most frequent word ids, most frequent first.

    ``n_wk`` is any [V, K] array-like sliceable by rows (a Zarr array is read in blocks
    of rows, so a large vocabulary never sits in memory whole). Ties go to the lower id.
    """
    n_words, n_topics = n_wk.shape
    keep = min(top_n, n_words)
    best_counts = np.full((n_topics, 0), -1, dtype=np.int64)
    best_ids = np.zeros((n_topics, 0), dtype=np.int64)
    for start in range(0, n_words, _ROW_BLOCK):
        block = np.asarray(n_wk[start:start + _ROW_BLOCK], dtype=np.int64).T  # [K, rows]
        ids = np.broadcast_to(np.arange(start, start + block.shape[1]), block.shape)
        counts = np.concatenate([best_counts, block], axis=1)
        cand = np.concatenate([best_ids, ids], axis=1)
        # Sort by (-count, id): the id key makes ties deterministic.
        order = np.lexsort((cand, -counts), axis=1)[:, :keep]
        best_counts = np.take_along_axis(counts, order, axis=1)
        best_ids = np.take_along_axis(cand, order, axis=1)
    return best_ids


# --------------------------------------------------------------------------- figures


def topic_sizes_figure(sizes: Sequence[float], top_words: list[list[str]]):
    """Bar chart: share of the corpus's tokens in each topic, top words on hover."""
    k = len(sizes)
    src = ColumnDataSource({
        "topic": list(range(k)),
        "share": list(sizes),
        "words": [" ".join(ws[:8]) for ws in top_words],
    })
    fig = panel_figure("Topic sizes", "topic", "share of tokens",
                       width=max(430, min(1290, 14 * k + 120)))
    fig.vbar(x="topic", top="share", source=src, width=0.8, color="#1f77b4")
    fig.add_tools(HoverTool(tooltips=[("topic", "@topic"), ("share", "@share{0.0%}"),
                                      ("words", "@words")]))
    fig.yaxis.formatter = NumeralTickFormatter(format="0.0%")
    fig.y_range.start = 0
    return fig


def evaluation_figures(evaluation: dict[str, Any], n_topics: int) -> list:
    """Make one bar chart per list of ``n_topics`` numbers found in the evaluation, at most 4.

    Such lists are per-topic scores such as coherence.
    """
    figs = []
    for key, value in _flatten(evaluation):
        if (isinstance(value, list) and len(value) == n_topics and n_topics > 0
                and any(_is_number(v) for v in value)
                and all(v is None or _is_number(v) for v in value)):  # None: undefined
            fig = panel_figure(f"{key} per topic", "topic", key.rsplit(".", 1)[-1],
                               width=max(430, min(1290, 14 * n_topics + 120)))
            fig.vbar(x=list(range(n_topics)),
                     top=[float(v) if _is_number(v) else math.nan for v in value], width=0.8,
                     color="#ff7f0e")
            fig.name = f"biglda_eval_{len(figs)}"
            figs.append(fig)
            if len(figs) == 4:
                break
    return figs


# --------------------------------------------------------------------------- HTML pieces


def _header_html(model: str, attrs: dict[str, Any], history: list[dict[str, Any]]) -> str:
    last = history[-1] if history else {}
    tps = [r["tokens_per_s"] for r in history if _is_number(r.get("tokens_per_s"))]
    facts = [
        ("topics", attrs.get("n_topics")),
        ("vocabulary", attrs.get("n_words")),
        ("documents", attrs.get("n_docs")),
        ("tokens", attrs.get("n_tokens")),
        ("sampler", attrs.get("sampler") or (attrs.get("config") or {}).get("algorithm")),
        ("iterations", last.get("iteration", len(history)) if history else 0),
        ("final LL / token", _fmt(last.get("ll_per_token"), ".4f")),
        ("training time", format_seconds(last.get("elapsed"))),
        ("mean tokens / s", _fmt(sum(tps) / len(tps) if tps else None, ",.0f")),
    ]
    cells = "".join(f"<span>{html.escape(k)} <b>{html.escape(_fmt(v))}</b></span>"
                    for k, v in facts)
    corpus = attrs.get("corpus")
    where = f" &middot; trained on <code>{html.escape(str(corpus))}</code>" if corpus else ""
    return (f"<h1>biglda report</h1><div class='sub'><code>{html.escape(model)}</code>{where}"
            f"</div><div class='facts'>{cells}</div>")


def _workers_html(history: list[dict[str, Any]]) -> str:
    sums: dict[str, list[float]] = {}
    for r in history:
        for w, v in (r.get("tokens_per_s_per_worker") or {}).items():
            if _is_number(v):
                sums.setdefault(str(w), []).append(float(v))
    if not sums:
        return "<p class='note'>No per-worker throughput in the history.</p>"
    total = sum(sum(v) / len(v) for v in sums.values()) or 1.0
    rows = "".join(
        f"<tr><td>{html.escape(short_worker(w))}</td><td class='num'>{sum(v) / len(v):,.0f}</td>"
        f"<td class='num'>{max(v):,.0f}</td><td class='num'>{100 * sum(v) / len(v) / total:.1f}%"
        f"</td><td class='num'>{len(v)}</td></tr>"
        for w, v in sorted(sums.items()))
    return ("<table class='data'><tr><th>worker</th><th>mean tokens/s</th><th>best tokens/s</th>"
            f"<th>share</th><th>iterations</th></tr>{rows}</table>")


def _topics_html(top_words: list[list[str]], sizes: list[float],
                 npmi: list[float | None] | None = None) -> str:
    """Render the topics table; with a saved evaluation, each topic's NPMI coherence too."""
    head = "<th>topic</th><th>tokens</th>" + ("<th>NPMI</th>" if npmi else "")
    rows = "".join(
        f"<tr><td class='num'>{k}</td><td class='num'>{100 * s:.1f}%</td>"
        + (f"<td class='num'>{_fmt(npmi[k], '.3f')}</td>" if npmi else "")
        + f"<td>{html.escape(' '.join(ws))}</td></tr>"
        for k, (ws, s) in enumerate(zip(top_words, sizes, strict=True)))
    return (f"<table class='data' id='biglda-top-words'><tr>{head}<th>top words</th></tr>"
            f"{rows}</table>")


def _per_topic(evaluation: dict[str, Any], key: str, n_topics: int) -> list | None:
    value = evaluation.get(key)
    if isinstance(value, list) and len(value) == n_topics and n_topics:
        return [v if _is_number(v) else None for v in value]
    return None


def _config_html(attrs: dict[str, Any]) -> str:
    config = dict(attrs.get("config") or {})
    model = {k: attrs[k] for k in ("sampler", "beta", "n_topics") if k in attrs}
    alpha = attrs.get("alpha")
    if isinstance(alpha, list) and alpha:
        model["alpha"] = (f"{alpha[0]:g} (symmetric)" if len(set(alpha)) == 1 else
                          f"asymmetric, {min(alpha):g} .. {max(alpha):g}, sum {sum(alpha):g}")
    tokenizer = attrs.get("tokenizer") or {}
    parts = [config_table_html(config, "Training settings"),
             config_table_html(model, "Model"),
             config_table_html(tokenizer, "Tokenizer")]
    return "<div style='display:flex;gap:48px;align-items:flex-start'>" + "".join(
        f"<div>{p}</div>" for p in parts) + "</div>"


def _evaluations_html(evaluations: dict[str, Any]) -> str:
    """Render the saved evaluations, one row per test corpus (the latest last)."""
    if not evaluations:
        return ""
    cols = [("heldout_loglik_per_token", "LL / token", ".4f"), ("perplexity", "perplexity", ".1f"),
            ("heldout_unknown_share", "unknown tokens", ".1%"), ("npmi", "NPMI", ".4f"),
            ("umass", "UMass", ".4f"), ("diversity", "diversity", ".3f")]
    head = "".join(f"<th>{html.escape(t)}</th>" for _, t, _ in cols)
    rows = "".join(
        f"<tr><td><code>{html.escape(str(test))}</code></td>"
        f"<td>{html.escape(str(ev.get('saved_at', '-')))}</td>"
        + "".join(f"<td class='num'>{html.escape(_fmt(ev.get(k), spec))}</td>"
                  for k, _, spec in cols) + "</tr>"
        for test, ev in evaluations.items() if isinstance(ev, dict))
    return (f"<table class='data' id='biglda-evaluations'><tr><th>test corpus</th><th>saved</th>"
            f"{head}</tr>{rows}</table><p class='note'>The last one saved, in full:</p>")


def _evaluation_html(evaluation: dict[str, Any], model: str = "MODEL") -> str:
    if not evaluation:
        cmd = f"biglda evaluate {model} --test TEST.zarr --save"
        return ("<p class='note'>No evaluation yet: run <code>"
                f"{html.escape(cmd)}</code> to add held-out perplexity and topic coherence "
                "(make <code>TEST.zarr</code> with <code>biglda split</code> before training, or "
                f"<code>biglda ingest NEW.txt --out TEST.zarr --vocab-from {html.escape(model)}"
                "</code>).</p>")
    rows = []
    for key, value in _flatten(evaluation):
        if isinstance(value, list) and len(value) > 8:
            shown = f"{len(value)} values (plotted below when per topic)"
        elif isinstance(value, list):
            shown = ", ".join(_fmt(v, ".4g") for v in value)
        else:
            shown = _fmt(value, ".6g")
        rows.append(f"<tr><td>{html.escape(key)}</td>"
                    f"<td class='num'>{html.escape(shown)}</td></tr>")
    return "<table class='data'>" + "".join(rows) + "</table>"


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.extend(_flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v: Any, spec: str = "") -> str:
    if v is None:
        return "-"
    if _is_number(v) and spec:
        return format(v, spec)
    if isinstance(v, float):
        return format(v, ".4g")
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)
