"""Recipe of the shipped demo corpus ``datasets/demo/debian-sample.tsv.gz``.

3000 documents (``package<TAB>description``) drawn without replacement, with a fixed
seed, from the Debian package descriptions, kept in their original order, and
gzipped with a zero timestamp so the output is byte-for-byte reproducible::

    .venv/bin/python datasets/demo/make_sample.py \
        /work/shared/corpora/debian-descriptions.tsv.gz datasets/demo/debian-sample.tsv.gz
"""

from __future__ import annotations

import argparse
import gzip

import numpy as np

N_DOCS = 3000
SEED = 20240


def main() -> None:
    """Write the sample (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="debian-descriptions.tsv.gz")
    parser.add_argument("out", help="where to write the sample (.tsv.gz)")
    parser.add_argument("--docs", type=int, default=N_DOCS)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    with gzip.open(args.source, "rb") as f:
        lines = [line for line in f if line.strip()]
    rng = np.random.default_rng(args.seed)
    pick = np.sort(rng.choice(len(lines), size=min(args.docs, len(lines)), replace=False))
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                    filename="") as out:
        for i in pick:
            out.write(lines[i])
    print(f"wrote {len(pick)} of {len(lines)} documents to {args.out}")


if __name__ == "__main__":
    main()
