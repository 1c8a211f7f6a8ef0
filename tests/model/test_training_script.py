"""The Python API from a plain script: no ``if __name__ == "__main__":`` guard.

The embedded cluster's workers are processes started by ``python -m dask spec``, not by a
``multiprocessing`` spawn that re-imports ``__main__``; an unguarded script that trains runs
once and exits 0 (oracle: the exit code, no traceback, and a count of the script's own runs).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from biglda.corpus import write_corpus
from biglda.corpus.synth import SynthSpec, generate

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_snippet() -> str:
    """The README's Python snippet, exactly as written."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    snippet = [b for b in blocks if "biglda.train(" in b]
    assert snippet, "README.md has no Python snippet calling biglda.train"
    return snippet[0]


def _write_corpus(url: str, seed: int) -> None:
    spec = SynthSpec(n_docs=40, n_words=60, n_topics=3, mean_doc_length=20, seed=seed)
    tokens, doc_ptr, _, _ = generate(spec)
    words = ["python", "libraries", "new", "document"] + [f"w{i}" for i in range(4, 60)]
    write_corpus(url, tokens, doc_ptr, words, chunk_tokens=1024)


def _run_script(tmp_path: Path, code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    # count the runs of the script's body: a spawn that re-imports __main__ runs it again
    script.write_text("open('runs.log', 'a').write('run\\n')\n" + code)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout)


def test_readme_snippet_runs_as_a_plain_script(tmp_path, local_cluster):
    _write_corpus(str(tmp_path / "corpus.zarr"), seed=1)
    _write_corpus(str(tmp_path / "heldout.zarr"), seed=2)
    # the snippet's last line loads a model.zarr: one written beforehand by the API (on the
    # shared cluster; the snippet's own run starts the embedded one)
    from biglda.model.training import train

    train(str(tmp_path / "corpus.zarr"), str(tmp_path / "model.zarr"), n_topics=2,
          iterations=2, scheduler=local_cluster)
    done = _run_script(tmp_path, _readme_snippet())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert (tmp_path / "runs.log").read_text() == "run\n"


def test_estimator_fit_in_an_unguarded_script(tmp_path):
    code = (
        "import numpy as np\nimport biglda\n"
        "X = np.random.default_rng(0).poisson(1.0, size=(30, 20))\n"
        "lda = biglda.LDA(n_components=3, iterations=3, random_state=0).fit(X)\n"
        "print('components', lda.components_.shape)\n")
    done = _run_script(tmp_path, code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "components (3, 20)" in done.stdout
    assert (tmp_path / "runs.log").read_text() == "run\n"
