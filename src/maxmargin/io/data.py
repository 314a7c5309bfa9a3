r"""Reading data files: CSV (label first) and LIBSVM/svmlight, plain or compressed.

Formats
-------
**CSV** (also any delimited text): one sample per line, the label in the first
column (or the column named by ``label_column``), the features after it.  An
optional header line is recognised when most of its fields are not numbers (or
forced with ``header=True``).  The delimiter is guessed from the first data line
(``,`` then tab then ``;``, otherwise runs of white space) or given with
``delimiter``.  Blank lines and lines starting with ``#`` are skipped.  Values
must be finite numbers; labels must be numbers too.  Seed 003's example
``y,x1,x2 / 1,1,5 / ...`` reads as it is.

**LIBSVM / svmlight**: ``label index:value index:value ...`` with 1-based,
increasing feature indices, ``# comments`` and an optional ``qid:N`` after the
label.  Read by :func:`sklearn.datasets.load_svmlight_file` into a CSR matrix;
when scikit-learn rejects a file, the file is scanned line by line to say which
line is wrong and why.

**Compression**: gzip, bzip2 and xz are recognised from the first bytes (not
the file name) and decompressed with the standard library.

**Detection**: ``format='auto'`` looks at the first data lines: a field of the
form ``<integer>:<value>`` after the label means LIBSVM, anything else CSV.

Every problem raises :class:`maxmargin.io.DataFormatError` naming the file, the
line (1-based, counted in the decompressed text) and what is wrong.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import math
import os
import re
import sys
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .errors import DataFormatError

__all__ = ["Dataset", "load_data", "read_data", "detect_format", "read_bytes", "FORMATS", "MAX_FEATURES"]

#: accepted values of ``format``
FORMATS = ("auto", "csv", "libsvm", "svmlight")
#: the largest number of features (largest LIBSVM feature index) maxmargin accepts: the solvers and
#: the linear models keep dense vectors of n_features numbers (256 MB each at this limit), so a
#: stray huge index would otherwise allocate gigabytes
MAX_FEATURES = 2**25

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)
_LIBSVM_FEATURE = re.compile(r"^(?:\d+|qid):\S*$")
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


@dataclass
class Dataset:
    """What :func:`read_data` returns.

    ``X`` is a dense ``float64`` array for CSV and a CSR matrix for LIBSVM files;
    ``y`` is ``float64`` (``None`` when the file has no label column).
    """

    X: object
    y: np.ndarray | None
    format: str
    path: str
    feature_names: list | None = None
    compression: str | None = None
    line_numbers: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]


# --------------------------------------------------------------------------- bytes


def _name(path):
    return "<stdin>" if path == "-" else os.fspath(path)


def read_bytes(path):
    """Read a file (``'-'`` is standard input) and decompress gzip/bzip2/xz.

    Returns ``(data, compression)`` with ``compression`` None, ``'gzip'``,
    ``'bzip2'`` or ``'xz'``.
    """
    name = _name(path)
    if path == "-":
        raw = sys.stdin.buffer.read()
    else:
        p = os.fspath(path)
        if not os.path.exists(p):
            raise FileNotFoundError(f"{p}: no such file")
        if os.path.isdir(p):
            raise IsADirectoryError(f"{p}: is a directory, not a data file")
        try:
            with open(p, "rb") as fh:
                raw = fh.read()
        except PermissionError as exc:
            raise PermissionError(f"{p}: permission denied") from exc
    compression = None
    for magic, codec in _MAGIC:
        if raw.startswith(magic):
            compression = codec
            break
    if compression is None:
        if name.endswith(_COMPRESSED_SUFFIXES) and raw:
            suffix = name.rsplit(".", 1)[-1]
            raise DataFormatError(f"the name ends in .{suffix} but the content is not {suffix}-compressed", name)
        return raw, None
    try:
        if compression == "gzip":
            data = gzip.decompress(raw)
        elif compression == "bzip2":
            data = bz2.decompress(raw)
        else:
            data = lzma.decompress(raw)
    except (OSError, EOFError, ValueError, lzma.LZMAError) as exc:
        raise DataFormatError(f"damaged or truncated {compression} file ({exc})", name) from None
    return data, compression


def _decode(data, name):
    if b"\x00" in data[:65536]:
        raise DataFormatError("binary content (NUL bytes): not a CSV or LIBSVM text file", name)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise DataFormatError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})", name, line) from None


def _data_lines(text):
    """(line_number, stripped_line) for every line that is not blank or a comment."""
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s and not s.startswith("#"):
            yield i, s


# --------------------------------------------------------------------------- detection


def detect_format(text):
    """``'libsvm'`` or ``'csv'`` from the first data lines of ``text``."""
    n = 0
    for _, s in _data_lines(text):
        tokens = s.split("#", 1)[0].split()
        if len(tokens) > 1 and any(_LIBSVM_FEATURE.match(t) for t in tokens[1:]):
            return "libsvm"
        n += 1
        if n >= 20:
            break
    return "csv"


def _number(token):
    try:
        v = float(token)
    except ValueError:
        return None
    return v


# --------------------------------------------------------------------------- CSV


def _split_csv(line, delimiter):
    if delimiter is None:
        return line.split()
    fields = [f.strip() for f in line.split(delimiter)]
    return [f[1:-1].strip() if len(f) >= 2 and f[0] == f[-1] and f[0] in "\"'" else f for f in fields]


def _guess_delimiter(line):
    for d in (",", "\t", ";"):
        if d in line:
            return d
    return None


def _describe_delimiter(d):
    return {None: "white space", ",": "','", "\t": "tab", ";": "';'"}.get(d, repr(d))


def _resolve_label_column(label_column, n_cols, header_fields, name, line):
    if label_column is None:
        return None
    if isinstance(label_column, str) and not re.fullmatch(r"-?\d+", label_column.strip()):
        if label_column == "last":
            return n_cols - 1
        if label_column == "first":
            return 0
        if header_fields is None:
            raise DataFormatError(f"label column {label_column!r} given by name, but the file has no header line", name)
        if label_column not in header_fields:
            raise DataFormatError(
                f"no column named {label_column!r} in the header (columns: {', '.join(header_fields)})", name, line
            )
        return header_fields.index(label_column)
    idx = int(label_column)
    if not -n_cols <= idx < n_cols:
        raise DataFormatError(f"label column {idx} is out of range: the file has {n_cols} columns", name, line)
    return idx % n_cols


def _diagnose_csv(lines, delimiter, n_cols, label_idx, name):
    """Find the first bad line; raise DataFormatError for it."""
    for lineno, s in lines:
        fields = _split_csv(s, delimiter)
        if len(fields) != n_cols:
            raise DataFormatError(
                f"expected {n_cols} fields separated by {_describe_delimiter(delimiter)}, found {len(fields)}",
                name,
                lineno,
            )
        for j, f in enumerate(fields):
            what = "label" if j == label_idx else f"value in column {j + 1}"
            if f == "":
                raise DataFormatError(f"empty {what}", name, lineno)
            v = _number(f)
            if v is None:
                hint = " (if this line is a header, pass header=True / --header)" if lineno == lines[0][0] else ""
                raise DataFormatError(f"{what} {f!r} is not a number{hint}", name, lineno)
            if not math.isfinite(v):
                raise DataFormatError(f"{what} is {f!r}; values must be finite numbers", name, lineno)


def _read_csv(text, name, delimiter="auto", header="auto", label_column=0, labels=True, n_features=None):
    lines = list(_data_lines(text))
    if not lines:
        raise DataFormatError(
            "no data: the file is empty" if not text.strip() else "no data lines (only comments)", name
        )
    first_no, first = lines[0]
    if delimiter == "auto":
        delimiter = _guess_delimiter(first)
    elif delimiter in ("whitespace", " ", "space"):
        delimiter = None
    elif delimiter in ("\\t", "tab"):
        delimiter = "\t"
    first_fields = _split_csv(first, delimiter)
    if header == "auto":
        non_numeric = sum(_number(f) is None for f in first_fields)
        header = non_numeric > len(first_fields) / 2
    header_fields = None
    if header:
        header_fields = first_fields
        lines = lines[1:]
        if not lines:
            raise DataFormatError("only a header line, no data", name, first_no)
    n_cols = len(_split_csv(lines[0][1], delimiter))
    if header_fields is not None and len(header_fields) != n_cols:
        raise DataFormatError(
            f"the header has {len(header_fields)} fields but the first data line has {n_cols}", name, lines[0][0]
        )
    if labels == "auto":
        if n_features is None:
            labels = True
        elif n_cols == n_features:
            labels = False
        elif n_cols == n_features + 1:
            labels = True
        else:
            raise DataFormatError(
                f"{n_cols} columns, but the model expects {n_features} features (plus an optional label column)",
                name,
                lines[0][0],
            )
    label_idx = _resolve_label_column(label_column, n_cols, header_fields, name, first_no) if labels else None

    body = "\n".join(s for _, s in lines)
    try:
        kwargs = {"delimiter": delimiter, "ndmin": 2, "dtype": np.float64, "comments": None}
        if delimiter is not None:
            kwargs["quotechar"] = '"'
        M = np.loadtxt(io.StringIO(body), **kwargs)
    except ValueError:
        _diagnose_csv(lines, delimiter, n_cols, label_idx, name)
        raise DataFormatError("could not parse the file as delimited numbers", name) from None
    if M.shape[1] != n_cols:  # pragma: no cover - loadtxt already checks
        _diagnose_csv(lines, delimiter, n_cols, label_idx, name)
    if not np.isfinite(M).all():
        _diagnose_csv(lines, delimiter, n_cols, label_idx, name)
    line_numbers = np.fromiter((n for n, _ in lines), dtype=np.int64, count=len(lines))
    if label_idx is None:
        X, y = M, None
        names = header_fields
    else:
        y = np.ascontiguousarray(M[:, label_idx])
        X = np.ascontiguousarray(np.delete(M, label_idx, axis=1))
        names = None if header_fields is None else [f for j, f in enumerate(header_fields) if j != label_idx]
    if X.shape[1] == 0:
        raise DataFormatError("no feature columns: every line has only a label", name, first_no)
    if n_features is not None and X.shape[1] != n_features:
        raise DataFormatError(f"{X.shape[1]} feature columns, but the model expects {n_features}", name, lines[0][0])
    return Dataset(X, y, "csv", name, names, line_numbers=line_numbers)


# --------------------------------------------------------------------------- LIBSVM


def _diagnose_libsvm(text, name, zero_based=False):
    """Scan ``text`` line by line; raise DataFormatError at the first bad line."""
    lo = 0 if zero_based else 1
    for lineno, raw in enumerate(text.splitlines(), 1):
        s = raw.split("#", 1)[0].strip()
        if not s:
            continue
        tokens = s.split()
        v = _number(tokens[0])
        if ":" in tokens[0] and v is None:
            raise DataFormatError(f"the line starts with {tokens[0]!r}: the label is missing", name, lineno)
        if v is None:
            raise DataFormatError(f"label {tokens[0]!r} is not a number", name, lineno)
        if not math.isfinite(v):
            raise DataFormatError(f"label {tokens[0]!r} is not a finite number", name, lineno)
        last = lo - 1
        for k, tok in enumerate(tokens[1:], 2):
            if ":" not in tok:
                raise DataFormatError(f"field {k} {tok!r} is not of the form index:value", name, lineno)
            idx, val = tok.split(":", 1)
            if idx == "qid":
                if k != 2:
                    raise DataFormatError(f"qid must come right after the label (field {k})", name, lineno)
                continue
            try:
                i = int(idx)
            except ValueError:
                raise DataFormatError(f"feature index {idx!r} in {tok!r} is not an integer", name, lineno) from None
            if i < lo:
                hint = " (LIBSVM indices start at 1)" if not zero_based and i == 0 else ""
                raise DataFormatError(f"feature index {i} is invalid{hint}", name, lineno)
            if i - lo >= MAX_FEATURES:
                raise DataFormatError(too_many_features_message(i), name, lineno)
            fv = _number(val)
            if fv is None:
                raise DataFormatError(f"value {val!r} of feature {i} is not a number", name, lineno)
            if not math.isfinite(fv):
                raise DataFormatError(f"value {val!r} of feature {i} is not a finite number", name, lineno)
            if i <= last:
                raise DataFormatError(
                    f"feature indices must increase along a line: {i} comes after {last}", name, lineno
                )
            last = i


def too_many_features_message(index, where="feature index"):
    """The reason given for a feature index beyond :data:`MAX_FEATURES` (1-based ``index``)."""
    return (
        f"{where} {index:,} is beyond maxmargin's limit of {MAX_FEATURES:,} features "
        f"(maxmargin.io.data.MAX_FEATURES; the solvers keep dense vectors of one number per feature)"
    )


def _refuse_wide(X, text, name, zero_based):
    """DataFormatError naming the first line with a feature index beyond MAX_FEATURES."""
    big = np.flatnonzero(X.indices >= MAX_FEATURES)
    pos = int(big[0]) if big.size else int(np.argmax(X.indices))
    row = int(np.searchsorted(X.indptr, pos, side="right")) - 1
    line = None
    for r, (lineno, _) in enumerate(_data_lines(text)):
        if r == row:
            line = lineno
            break
    index = int(X.indices[pos]) + (0 if zero_based else 1) if X.nnz else X.shape[1]
    raise DataFormatError(too_many_features_message(index), name, line)


def _read_libsvm(data, text, name, n_features=None, zero_based=False):
    from sklearn.datasets import load_svmlight_file

    if not any(True for _ in _data_lines(text)):
        raise DataFormatError(
            "no data: the file is empty" if not text.strip() else "no data lines (only comments)", name
        )
    try:
        X, y = load_svmlight_file(io.BytesIO(data), zero_based=zero_based, dtype=np.float64)
    except (ValueError, OverflowError) as exc:  # OverflowError: an index beyond 32 bits
        _diagnose_libsvm(text, name, zero_based)
        raise DataFormatError(f"not a valid LIBSVM file ({exc})", name) from None
    if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
        _diagnose_libsvm(text, name, zero_based)
    X = X.tocsr()
    if X.shape[1] > MAX_FEATURES:
        _refuse_wide(X, text, name, zero_based)
    if X.nnz < 2**31 - 1 and X.shape[1] < 2**31 - 1:  # 32-bit indices: what the estimators accept
        X = sp.csr_matrix(
            (X.data, X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False)), shape=X.shape
        )
    X.sort_indices()
    if n_features is not None:
        if X.shape[1] > n_features:
            cols = X.indices[X.indices >= n_features]
            raise DataFormatError(
                f"feature index {int(cols.max()) + (0 if zero_based else 1)} is beyond the "
                f"{n_features} features the model was trained with",
                name,
            )
        if X.shape[1] < n_features:
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
            X.indices = X.indices.astype(np.int32, copy=False)
            X.indptr = X.indptr.astype(np.int32, copy=False)
    return Dataset(X, np.asarray(y, dtype=np.float64), "libsvm", name)


# --------------------------------------------------------------------------- API


def read_data(
    path,
    format="auto",
    *,
    delimiter="auto",
    header="auto",
    label_column=0,
    labels=True,
    n_features=None,
    zero_based=False,
):
    """Read a data file into a :class:`Dataset`.

    Parameters
    ----------
    path : str or path-like
        The file; ``'-'`` reads standard input.  gzip/bzip2/xz content is
        decompressed.
    format : {'auto', 'csv', 'libsvm', 'svmlight'}
        ``'auto'`` decides from the content.
    delimiter : str, 'auto' or 'whitespace'
        CSV only.
    header : bool or 'auto'
        CSV only: whether the first line names the columns.
    label_column : int or str
        CSV only: 0-based column index (negative counts from the end), a header
        name, ``'first'`` or ``'last'``.
    labels : bool or 'auto'
        CSV only: whether the file has a label column.  ``'auto'`` (with
        ``n_features``) decides from the number of columns, so that prediction
        files may leave the label out.
    n_features : int, optional
        The number of features expected (a model's ``n_features_in_``): LIBSVM
        data with fewer is widened with zero columns, more is an error.
    zero_based : bool
        LIBSVM only: whether feature indices start at 0 (LIBSVM itself uses 1).

    Raises
    ------
    FileNotFoundError, IsADirectoryError, PermissionError
        For a path that is not a readable file.
    DataFormatError
        For content that cannot be read, naming the line and the problem.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    name = _name(path)
    data, compression = read_bytes(path)
    text = _decode(data, name)
    fmt = detect_format(text) if format == "auto" else format
    if fmt == "svmlight":
        fmt = "libsvm"
    if fmt == "libsvm":
        ds = _read_libsvm(data, text, name, n_features=n_features, zero_based=zero_based)
    else:
        try:
            ds = _read_csv(
                text,
                name,
                delimiter=delimiter,
                header=header,
                label_column=label_column,
                labels=labels,
                n_features=n_features,
            )
        except DataFormatError as exc:
            if format == "auto" or detect_format(text) != "libsvm":
                raise
            raise DataFormatError(
                f"{exc.reason} (the file looks like LIBSVM format, not CSV)", name, exc.line
            ) from None
    ds.compression = compression
    return ds


def load_data(path, format="auto", **options):
    """Read a CSV or LIBSVM file; return ``(X, y)``.  See :func:`read_data` for the options."""
    ds = read_data(path, format, **options)
    return ds.X, ds.y
