"""Where outputs live: fsspec URLs, and atomic "write elsewhere, then move into place".

Every writer of a corpus or a model goes through :func:`atomic_output` (a store, i.e. a
folder) or :func:`write_atomic` (one file), so an interrupted or failed write never leaves
something at the final path that opens as valid: the output is built at a temporary sibling
path and moved into place only after it is complete. :func:`check_output` is the one
"output exists unless overwrite" rule, with the one message.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import IO, Any

import fsspec

from biglda.errors import BigLDAError, OutputExistsError


def split_url(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """Return ``(filesystem, path)`` for a local path or any fsspec URL."""
    fs, path = fsspec.core.url_to_fs(os.fspath(url))
    return fs, path


def exists(url: str) -> bool:
    """Whether anything exists at ``url`` (a file, a directory or a store)."""
    fs, path = split_url(url)
    return bool(fs.exists(path))


def remove(url: str) -> None:
    """Remove whatever is at ``url`` (recursively); nothing if it does not exist."""
    fs, path = split_url(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def update_attributes(group: Any, attrs: dict[str, Any]) -> None:
    """Merge ``attrs`` into a zarr group's attributes in one write of its metadata.

    Not ``group.attrs.update(attrs)``: zarr's ``Attributes`` is a ``MutableMapping`` whose
    ``update`` sets one key at a time, each a write of the whole ``zarr.json``, so a process
    killed in between leaves some keys new and others old (a checkpoint's new ``clock`` with
    its old ``slot`` and history). ``Group.update_attributes`` writes the merged metadata
    once (a local store writes a temporary file and renames it; an object store's put is
    atomic).
    """
    group.update_attributes(dict(attrs))


def check_output(url: str, *, overwrite: bool) -> None:
    """Raise :class:`OutputExistsError` when ``url`` exists and ``overwrite`` is false.

    Examples
    --------
    >>> check_output("memory://doc/never-written", overwrite=False)
    """
    if not overwrite and exists(url):
        raise OutputExistsError(f"output {os.fspath(url)} already exists (use --overwrite to "
                                "replace it)")


def check_writable(out: str) -> None:
    """Fail before any work when a local ``out`` cannot be written (its folder is made).

    Remote stores are left to their first write.
    """
    if "://" in out and not out.startswith("file://"):
        return
    path = out.removeprefix("file://")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise BigLDAError(f"cannot write {out}: {exc.strerror or type(exc).__name__}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BigLDAError(f"cannot write {out}: Permission denied")


def _sibling(url: str, tag: str) -> str:
    url = os.fspath(url).rstrip("/")
    head, _, tail = url.rpartition("/")
    name = f".{tail}.{tag}-{uuid.uuid4().hex[:8]}"
    return f"{head}/{name}" if head else name


@contextlib.contextmanager
def atomic_output(url: str, *, overwrite: bool = False) -> Iterator[str]:
    """Yield a temporary URL to write a store at; move it to ``url`` on success.

    Raises :class:`OutputExistsError` up front when ``url`` exists and ``overwrite``
    is false. On any exception (including KeyboardInterrupt) the temporary store is
    removed and ``url`` is left untouched.

    Examples
    --------
    >>> import zarr
    >>> with atomic_output("memory://doc/out.zarr", overwrite=True) as tmp:
    ...     _ = zarr.open_group(tmp, mode="w")  # write the store at tmp
    >>> exists("memory://doc/out.zarr")
    True
    """
    url = os.fspath(url).rstrip("/")
    check_output(url, overwrite=overwrite)
    tmp = _sibling(url, "tmp")
    fs, tmp_path = split_url(tmp)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(Exception):
            if fs.exists(tmp_path):
                fs.rm(tmp_path, recursive=True)
        raise
    if not fs.exists(tmp_path):
        raise RuntimeError(f"nothing was written at {tmp} for {url}")
    _, final_path = split_url(url)
    if fs.exists(final_path):
        # Move the old store aside first so the final path is never half-deleted.
        old = _sibling(url, "old")
        _, old_path = split_url(old)
        fs.mv(final_path, old_path, recursive=True)
        fs.mv(tmp_path, final_path, recursive=True)
        fs.rm(old_path, recursive=True)
    else:
        parent = final_path.rpartition("/")[0]
        if parent:
            fs.makedirs(parent, exist_ok=True)
        fs.mv(tmp_path, final_path, recursive=True)


def write_atomic(url: str, write: Callable[[IO[bytes]], None], *, overwrite: bool = True) -> str:
    """Call ``write(file)`` on a temporary sibling of ``url`` (one file), then move it there.

    Raises :class:`OutputExistsError` up front when ``url`` exists and ``overwrite`` is
    false; on any exception the temporary file is removed and ``url`` is left untouched
    (the exception propagates: callers turn an ``OSError`` into their own one line).
    Returns ``url``.

    Examples
    --------
    >>> _ = write_atomic("memory://doc/note.txt", lambda f: f.write(b"hello"))
    >>> fsspec.open("memory://doc/note.txt").open().read()
    b'hello'
    """
    url = os.fspath(url)
    check_output(url, overwrite=overwrite)
    fs, path = split_url(url)
    parent, _, name = path.rstrip("/").rpartition("/")
    tmp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:8]}" if parent else f".{name}.tmp"
    try:
        if parent:
            fs.makedirs(parent, exist_ok=True)
        with fs.open(tmp, "wb") as f:
            write(f)
        fs.mv(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):
            if fs.exists(tmp):
                fs.rm(tmp)
        raise
    return url


def write_text_atomic(url: str, text: str, *, overwrite: bool = True) -> str:
    """:func:`write_atomic` of ``text`` (UTF-8)."""
    return write_atomic(url, lambda f: f.write(text.encode("utf-8")), overwrite=overwrite)
