"""The two errors of :mod:`maxmargin.io`.

Both subclass :class:`ValueError`, so code that already catches ``ValueError``
keeps working; the command line prints their message in one line.
"""

from __future__ import annotations

import os


def _display(path):
    if path is None:
        return None
    if path == "-":
        return "<stdin>"
    return os.fspath(path)


class DataFormatError(ValueError):
    """A data file that cannot be read: names the file, the line and what is wrong.

    Attributes
    ----------
    path : str or None
        The file (``'<stdin>'`` for standard input).
    line : int or None
        1-based line number in the (decompressed) file, where one applies.
    reason : str
        What is wrong, without the location.
    """

    def __init__(self, reason, path=None, line=None):
        self.reason = reason
        self.path = _display(path)
        self.line = line
        where = self.path or "data"
        if line is not None:
            where = f"{where}, line {line}"
        super().__init__(f"{where}: {reason}")


class ModelFormatError(ValueError):
    """A model file that cannot be loaded (damaged, tampered, too new, not a model).

    Attributes
    ----------
    path : str or None
    reason : str
    """

    def __init__(self, reason, path=None, line=None):
        self.reason = reason
        self.path = _display(path)
        self.line = line
        where = self.path or "model"
        if line is not None:
            where = f"{where}, line {line}"
        super().__init__(f"{where}: {reason}")
