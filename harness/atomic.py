"""Files replaced whole: a reader sees either the old content or all of the new, never half.

`replacing(path)` opens a temporary file beside `path` (a hidden name unique to this process
and call, created exclusively, with the mode an ordinary open() would give under the umask),
hands it to the caller, and when the block ends without an error flushes it, fsyncs it,
renames it over `path` (os.replace) and fsyncs the folder so the rename itself survives a
crash. When the block raises, or the process is interrupted inside it, the temporary file is
removed and `path` keeps what it had. Two writers of one path never share a temporary file:
the last rename wins, and each rename is of a complete file.

Standard library only: the bundled trainer imports it for its checkpoints.
"""
import contextlib
import json
import os
import secrets
from typing import IO, Any, Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]


@contextlib.contextmanager
def replacing(path: PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """A file object ("w": text in UTF-8, "wb": bytes) whose content replaces `path` when the
    block ends without an error."""
    if mode not in ("w", "wb"):
        raise ValueError("replacing(): mode must be 'w' or 'wb', not %r" % (mode,))
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, ".%s.%d.%s.tmp" % (os.path.basename(path), os.getpid(), secrets.token_hex(4)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to open()
    try:
        with os.fdopen(fd, mode, encoding="utf-8" if mode == "w" else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(folder)


def write_text(path: PathLike, text: str) -> None:
    """Replace `path` whole with `text` (UTF-8)."""
    with replacing(path) as fh:
        fh.write(text)


def write_bytes(path: PathLike, data: bytes) -> None:
    """Replace `path` whole with `data`."""
    with replacing(path, "wb") as fh:
        fh.write(data)


def write_json(path: PathLike, value: Any, **dumps_options: Any) -> None:
    """Replace `path` whole with `value` as JSON and a final newline (json.dumps options pass
    through: indent, sort_keys)."""
    write_text(path, json.dumps(value, **dumps_options) + "\n")


def _sync_folder(folder: str) -> None:
    """The rename reaches the disk with the folder's entry; a folder that cannot be opened for
    this (some file systems) leaves the rename to the kernel's own time."""
    with contextlib.suppress(OSError):
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
