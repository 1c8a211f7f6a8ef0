"""Input formats for ``ingest``: find the inputs, read them as bounded raw blocks, parse blocks.

Formats (``--format``; ``auto`` picks by name, then by content):

* ``tsv``   — ``id<TAB>text`` per line (``.tsv``, ``.tsv.gz``).
* ``text``  — one document per line; the id is the line number (``.txt``, other names).
* ``jsonl`` — one JSON object per line with a text field and optionally an id field
  (``.jsonl``, ``.ndjson``).
* ``dir``   — a directory of ``.txt`` files (searched recursively), one document each;
  the id is the path relative to the directory, without ``.txt``.
* ``uci``   — UCI bag-of-words: ``docword.NAME.txt[.gz]`` (header ``D``, ``W``, ``NNZ``,
  then ``docID wordID count`` lines, 1-based, sorted by docID) and ``vocab.NAME.txt``
  next to it (one word a line, in wordID order).

Any file may be gzip-compressed (detected by its magic bytes). Blank lines are
skipped. With several inputs, document ids get a ``NAME:`` prefix (the file name)
when they are line numbers.

Text must be UTF-8. A byte sequence that is not UTF-8, or a NUL byte (binary
data), stops the ingest with an error that names the file and the line: silently
replacing bytes would hide a wrong encoding or a wrong file.

Reading is streaming: files are read in raw blocks of whole lines (a few MiB)
and parsed block by block, so memory does not grow with the input size. Blocks
are plain bytes plus their location, cheap to send to worker processes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from biglda.errors import InputError

FORMATS = ("tsv", "text", "jsonl", "dir", "uci")
BLOCK_BYTES = 4 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_UCI_DOCWORD = re.compile(r"^docword\.(.+)\.txt(\.gz)?$")


@dataclass(frozen=True)
class Source:
    """One input: a file or directory, its format, and the prefix of its line-number ids."""

    path: str
    fmt: str
    id_prefix: str = ""
    vocab_path: str | None = None  # uci only


@dataclass(frozen=True)
class Block:
    """A raw block of whole lines (or whole files, for ``dir``) with where it came from."""

    source: Source
    first_line: int  # 1-based line number of the first line in ``data``
    data: bytes | list[tuple[str, bytes]]


# --------------------------------------------------------------------------- finding inputs


def _open_binary(path: str) -> io.BufferedIOBase:
    try:
        f = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        raise InputError(f"input {path} not found") from None
    except IsADirectoryError:
        raise InputError(f"input {path} is a directory (use --format dir)") from None
    except OSError as exc:
        raise InputError(f"cannot read input {path}: {exc.strerror or exc}") from None
    head = f.peek(2)[:2] if hasattr(f, "peek") else b""
    if head == _GZIP_MAGIC:
        f.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return f  # type: ignore[return-value]


def _read(f: io.BufferedIOBase, n: int, path: str) -> bytes:
    try:
        return f.read(n)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"input {path} is a damaged gzip file ({exc})") from None


def _first_line(path: str) -> bytes:
    f = _open_binary(path)
    with f:
        return _read(f, 64 << 10, path).split(b"\n", 1)[0]


def detect_format(path: str) -> str:
    """Guess the format of one input from its name, then its first line.

    Examples
    --------
    >>> detect_format("docs.tsv.gz"), detect_format("docword.kos.txt")
    ('tsv', 'uci')
    """
    if os.path.isdir(path):
        return "dir"
    name = os.path.basename(path)
    base = name[:-3] if name.endswith(".gz") else name
    if _UCI_DOCWORD.match(name):
        return "uci"
    ext = os.path.splitext(base)[1].lower()
    if ext in (".jsonl", ".ndjson"):
        return "jsonl"
    if ext == ".tsv":
        return "tsv"
    if ext == ".txt":
        return "text"
    line = _first_line(path)
    if line.lstrip().startswith(b"{"):
        return "jsonl"
    if b"\t" in line:
        return "tsv"
    return "text"


def resolve_sources(inputs: list[str], fmt: str = "auto") -> list[Source]:
    r"""Check the inputs exist and give each its format and id prefix.

    UCI inputs are ``docword.*`` files (a ``vocab.*`` file given as an input is
    paired with its docword file and not read on its own). Raises
    :class:`InputError` for a missing input or a mix of UCI and text inputs.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = tempfile.mkdtemp(); p = pathlib.Path(d, "a.tsv"); _ = p.write_text("1\tx\n")
    >>> [s.fmt for s in resolve_sources([str(p)])]
    ['tsv']
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise InputError(f"unknown input format {fmt!r} (choose auto, {', '.join(FORMATS)})")
    if not inputs:
        raise InputError("no input given")
    for path in inputs:
        if not os.path.exists(path):
            raise InputError(f"input {path} not found")
        if not os.access(path, os.R_OK):
            raise InputError(f"input {path} is not readable (permission denied)")
    if fmt in ("uci", "auto"):
        inputs = [p for p in inputs
                  if not (re.match(r"^vocab\..+\.txt$", os.path.basename(p))
                          and any(_UCI_DOCWORD.match(os.path.basename(q)) for q in inputs))]
    fmts = [fmt if fmt != "auto" else detect_format(p) for p in inputs]
    if "uci" in fmts and len(set(fmts)) > 1:
        raise InputError("UCI bag-of-words inputs cannot be mixed with text inputs")
    if "uci" in fmts and len(inputs) > 1:
        raise InputError("give one UCI docword file per ingest")
    sources = []
    for path, f in zip(inputs, fmts, strict=True):
        if f == "dir" and not os.path.isdir(path):
            raise InputError(f"input {path} is not a directory (--format dir)")
        if f != "dir" and os.path.isdir(path):
            raise InputError(f"input {path} is a directory (use --format dir)")
        prefix = f"{os.path.basename(path.rstrip('/'))}:" if len(inputs) > 1 else ""
        vocab = _uci_vocab_path(path) if f == "uci" else None
        sources.append(Source(path, f, prefix, vocab))
    return sources


def _uci_vocab_path(docword: str) -> str:
    name = os.path.basename(docword)
    m = _UCI_DOCWORD.match(name)
    if not m:
        raise InputError(f"UCI input {docword} must be named docword.NAME.txt[.gz]")
    folder = os.path.dirname(docword)
    for cand in (f"vocab.{m.group(1)}.txt", f"vocab.{m.group(1)}.txt.gz"):
        path = os.path.join(folder, cand)
        if os.path.exists(path):
            return path
    raise InputError(f"UCI vocabulary vocab.{m.group(1)}.txt not found next to {docword}")


# --------------------------------------------------------------------------- raw blocks


def iter_line_blocks(path: str, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, bytes]]:
    r"""Yield ``(first_line, data)``: blocks of whole lines of a (possibly gzipped) file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp(), "a.txt"); _ = p.write_text("a\nb\nc\n")
    >>> list(iter_line_blocks(str(p), block_bytes=4))
    [(1, b'a\nb\n'), (3, b'c\n')]
    """
    f = _open_binary(path)
    with f:
        line, rest = 1, b""
        while True:
            data = _read(f, block_bytes, path)
            if not data:
                break
            if rest:
                data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than one block: keep reading
                rest = data
                continue
            chunk, rest = data[:cut], data[cut:]
            yield line, chunk
            line += chunk.count(b"\n")
        if rest:
            yield line, rest


def iter_blocks(source: Source, block_bytes: int = BLOCK_BYTES) -> Iterator[Block]:
    r"""Raw blocks of one text source (``tsv``, ``text``, ``jsonl`` or ``dir``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp(), "a.tsv"); _ = p.write_text("1\tx\n")
    >>> [b.data for b in iter_blocks(Source(str(p), "tsv"))]
    [b'1\tx\n']
    """
    if source.fmt == "dir":
        files = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(source.path)
            for name in names
            if name.endswith(".txt")
        )
        batch: list[tuple[str, bytes]] = []
        size = 0
        for path in files:
            f = _open_binary(path)
            with f:
                data = _read(f, -1, path)
            batch.append((path, data))
            size += len(data)
            if size >= block_bytes:
                yield Block(source, 1, batch)
                batch, size = [], 0
        if batch:
            yield Block(source, 1, batch)
        return
    for first, data in iter_line_blocks(source.path, block_bytes):
        yield Block(source, first, data)


# --------------------------------------------------------------------------- parsing blocks


def _decode(data: bytes, path: str, first_line: int) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        line = first_line + data.count(b"\n", 0, nul)
        raise InputError(f"{path}:{line}: NUL byte: this looks like a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {col}); "
            "convert the file to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def parse_block(block: Block, text_field: str = "text",
                id_field: str | None = None) -> tuple[list[str], list[str]]:
    r"""``(doc_ids, texts)`` of one raw block; raises :class:`InputError` naming file and line.

    Examples
    --------
    >>> b = Block(Source("x.tsv", "tsv"), 1, b"a\thello world\n\nb\tbye\n")
    >>> parse_block(b)
    (['a', 'b'], ['hello world', 'bye'])
    """
    src = block.source
    if src.fmt == "dir":
        ids, texts = [], []
        root = src.path.rstrip("/")
        for path, data in block.data:  # type: ignore[union-attr]
            rel = os.path.relpath(path, root)
            ids.append(src.id_prefix + (rel[:-4] if rel.endswith(".txt") else rel))
            texts.append(_decode(data, path, 1))
        return ids, texts
    text = _decode(block.data, src.path, block.first_line)  # type: ignore[arg-type]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    ids: list[str] = []
    texts: list[str] = []
    first = block.first_line
    if src.fmt == "tsv":
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            doc_id, tab, body = line.partition("\t")
            if not tab:
                raise InputError(
                    f"{src.path}:{first + i}: no TAB; TSV lines are id<TAB>text "
                    "(use --format text for one document per line)"
                )
            ids.append(doc_id)
            texts.append(body)
    elif src.fmt == "text":
        for i, line in enumerate(lines):
            if line.strip():
                ids.append(f"{src.id_prefix}{first + i}")
                texts.append(line)
    elif src.fmt == "jsonl":
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            where = f"{src.path}:{first + i}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not a JSON object ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            if text_field not in obj:
                raise InputError(
                    f"{where}: no field {text_field!r} (fields: {', '.join(list(obj)[:8])}); "
                    "choose one with --text-field"
                )
            body = obj[text_field]
            if not isinstance(body, str):
                raise InputError(f"{where}: field {text_field!r} is not a string")
            if id_field is None:
                doc_id = obj.get("id", f"{src.id_prefix}{first + i}")
            elif id_field in obj:
                doc_id = obj[id_field]
            else:
                raise InputError(f"{where}: no field {id_field!r} (--id-field)")
            ids.append(str(doc_id))
            texts.append(body)
    else:
        raise ValueError(f"parse_block does not read format {src.fmt!r}")
    return ids, texts


# --------------------------------------------------------------------------- UCI bag-of-words


@dataclass(frozen=True)
class UciHeader:
    """The three header numbers of a UCI docword file."""

    n_docs: int
    n_words: int
    nnz: int


def read_uci_vocab(path: str, n_words: int) -> list[str]:
    r"""Read the words of a UCI ``vocab.*.txt`` (one a line), checked against the header's W.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp(), "vocab.x.txt"); _ = p.write_text("cat\ndog\n")
    >>> read_uci_vocab(str(p), 2)
    ['cat', 'dog']
    """
    words: list[str] = []
    for first, data in iter_line_blocks(path):
        lines = _decode(data, path, first).split("\n")
        if lines[-1] == "":
            lines.pop()
        words.extend(w.strip() for w in lines)
    while words and words[-1] == "":
        words.pop()
    if len(words) != n_words:
        raise InputError(f"{path} has {len(words)} words but the docword header says W={n_words}")
    if len(set(words)) != len(words):
        raise InputError(f"{path} lists some words twice")
    return words


def iter_uci(source: Source) -> Iterator[UciHeader | tuple[np.ndarray, np.ndarray, np.ndarray]]:
    r"""Yield the header, then ``(doc_index, word_index, count)`` int64 arrays per block (0-based).

    Checks the header, the column count, the index ranges, the docID order, and
    that the body has exactly NNZ entries.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp(), "docword.x.txt")
    >>> _ = p.write_text("2\n3\n2\n1 3 2\n2 1 1\n")
    >>> header, (doc, word, count) = iter_uci(Source(str(p), "uci"))
    >>> header.nnz, doc.tolist(), word.tolist(), count.tolist()
    (2, [0, 1], [2, 0], [2, 1])
    """
    path = source.path
    header: list[int] = []
    nnz_seen = 0
    last_doc = -1
    hdr: UciHeader | None = None
    for first, data in iter_line_blocks(path):
        _decode(data, path, first)  # NUL / encoding check with a line number
        if len(header) < 3:
            lines = data.split(b"\n")
            consumed = 0
            while len(header) < 3 and consumed < len(lines):
                raw = lines[consumed].strip()
                consumed += 1
                if not raw:
                    continue
                try:
                    header.append(int(raw))
                except ValueError:
                    raise InputError(
                        f"{path}:{first + consumed - 1}: UCI header must be three numbers "
                        f"D, W, NNZ on their own lines, got {raw[:40].decode(errors='replace')!r}"
                    ) from None
            first += consumed
            data = b"\n".join(lines[consumed:])
            if len(header) == 3:
                hdr = UciHeader(*header)
                if min(header) < 0:
                    raise InputError(f"{path}: UCI header has a negative number {header}")
                yield hdr
        if hdr is None or not data.strip():
            continue
        try:
            arr = np.loadtxt(io.BytesIO(data), dtype=np.int64, ndmin=2)
        except ValueError as exc:
            raise InputError(
                f"{path}: bad UCI line after line {first}: {str(exc).splitlines()[0]}"
            ) from None
        if arr.shape[1] != 3:
            raise InputError(f"{path}:{first}: UCI lines are 'docID wordID count' (3 numbers)")
        doc, word, count = arr[:, 0] - 1, arr[:, 1] - 1, arr[:, 2]
        bad = (doc < 0) | (doc >= hdr.n_docs) | (word < 0) | (word >= hdr.n_words) | (count < 1)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(
                f"{path}: entry {nnz_seen + i + 1} ({doc[i] + 1} {word[i] + 1} {count[i]}) "
                f"is outside the header's D={hdr.n_docs}, W={hdr.n_words} or has count < 1"
            )
        if np.any(np.diff(doc) < 0) or (len(doc) and doc[0] < last_doc):
            raise InputError(f"{path}: UCI entries must be sorted by docID")
        last_doc = int(doc[-1])
        nnz_seen += len(doc)
        yield doc, word, count
    if hdr is None:
        raise InputError(f"{path} is empty or has no UCI header (D, W, NNZ)")
    if nnz_seen != hdr.nnz:
        raise InputError(f"{path} has {nnz_seen} entries but its header says NNZ={hdr.nnz}")
