"""Atomic file writes: a temporary file in the target's directory, then ``os.replace``.

An interrupted write (an exception, Ctrl-C, a full disk) leaves the target as it
was: either absent or the previous complete file.
"""

from __future__ import annotations

import os
import tempfile


def _default_mode(path):
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write(path, write, mode="wb"):
    """Call ``write(fh)`` on a temporary file next to ``path``, then rename it to ``path``.

    ``mode`` is ``'wb'`` (binary) or ``'w'`` (UTF-8 text).  The temporary file is
    removed if ``write`` raises (including ``KeyboardInterrupt``).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{path}: the directory {directory} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a directory")
    file_mode = _default_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _about_target(exc, path) from None
    try:
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with os.fdopen(fd, mode, **kwargs) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is not None and tmp in (exc.filename, exc.filename2):
            raise _about_target(exc, path) from None
        raise


def _about_target(exc, path):
    """The same OSError, naming the file the user asked for instead of the temporary file."""
    if exc.errno is None:  # pragma: no cover - OSErrors from the system carry an errno
        return exc
    return type(exc)(exc.errno, exc.strerror or str(exc), path)
