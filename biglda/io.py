"""Where stores live: fsspec URLs, and atomic "write elsewhere, then move into place".

Every writer of a corpus or a model goes through :func:`atomic_output`, so an
interrupted or failed write never leaves something at the final path that opens as
valid: the store is built at a temporary sibling path and moved into place only
after it is complete.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import fsspec

from biglda.errors import OutputExistsError


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
    if exists(url) and not overwrite:
        raise OutputExistsError(f"output {url} already exists (use --overwrite to replace it)")
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
