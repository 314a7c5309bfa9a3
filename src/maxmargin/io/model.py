r"""maxmargin model files: versioned, documented, data only.

Loading a model file never executes code: no pickle anywhere, every value is a
number, a string or a NumPy array of a plain dtype, and class names are looked
up in a fixed registry (the estimator classes of the :mod:`maxmargin` module
and a few scikit-learn scalers).

The format (version 1)
----------------------
A model file is a NumPy ``.npz`` archive (a zip file of ``.npy`` arrays, written
and read with ``allow_pickle=False``).  It holds

``__maxmargin__``
    A 1-D ``uint8`` array: the UTF-8 bytes of a JSON document, the *metadata*::

        {
          "format": "maxmargin-model",
          "format_version": 1,
          "maxmargin_version": "0.1.0",
          "created": "2025-01-31T12:00:00Z",
          "estimator": {"class": "SVC", "params": {...}, "attributes": {...}},
          "preprocessing": [{"class": "StandardScaler", "params": {...}, "attributes": {...}}],
          "info": {...},
          "sha256": "<64 hex digits>"
        }

    ``params`` is ``get_params()``; ``attributes`` are the fitted attributes the
    class lists in ``_state_attributes`` (plus ``n_features_in_`` and, for a model
    fitted on a DataFrame, ``feature_names_in_``, so that predict still checks the
    column names).
    ``preprocessing`` lists transformers applied before the estimator (the
    command line's ``--scale``); loading then returns a scikit-learn
    :class:`~sklearn.pipeline.Pipeline`.  ``info`` is free-form (training file,
    fit time, ...).

``estimator.<name>``, ``preprocessing.<i>.<name>``
    The arrays.  A sparse (CSR) attribute is three arrays ``<name>.data``,
    ``<name>.indices``, ``<name>.indptr`` plus its shape in the metadata.

Values in ``params``, ``attributes`` and ``info`` are JSON, with tags for what
JSON lacks: ``{"$array": key}`` (an array entry), ``{"$strings": key}`` (an array of
strings stored as a NumPy unicode array, read back with dtype object, as scikit-learn's
``feature_names_in_``), ``{"$csr": {...}}``,
``{"$float": "nan" | "inf" | "-inf"}``, ``{"$tuple": [...]}`` and
``{"$dict": [[key, value], ...]}`` (dicts keep non-string keys, for example
``class_weight={1: 5.0}``).

The zip archive's comment is ``maxmargin-sha256:`` and the SHA-256 (hex) of
every byte of the file before the comment, so any change to the file, a single
flipped bit or a missing tail, is detected before anything is read.  Besides,
``sha256`` in the metadata is the SHA-256 of the metadata without the ``sha256`` field
(serialised with sorted keys, compact separators) followed by, for every array
in sorted key order, the key, the dtype string, the shape and the raw bytes.
It detects damage and edits made without recomputing it; it is an integrity
check, not a signature.

Compatibility: a reader refuses a ``format_version`` newer than its own with a
message to upgrade; newer readers keep reading older versions.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import math
import numbers
import os
import zipfile
import zlib

import numpy as np
import scipy.sparse as sp

from ._atomic import atomic_write
from .errors import ModelFormatError

__all__ = ["save_model", "load_model", "read_model_metadata", "FORMAT_NAME", "FORMAT_VERSION", "estimator_registry"]

FORMAT_NAME = "maxmargin-model"
FORMAT_VERSION = 1
META_KEY = "__maxmargin__"
ZIP_MAGIC = b"PK\x03\x04"
SEAL_PREFIX = b"maxmargin-sha256:"

#: extra fitted attributes stored when present, besides ``_state_attributes`` (scikit-learn's
#: ``feature_names_in_``, set by fitting on a DataFrame, makes predict check the column names)
_EXTRA_ATTRIBUTES = ("n_features_in_", "feature_names_in_")


# --------------------------------------------------------------------------- registries


def estimator_registry():
    """Name -> class for every estimator class of :mod:`maxmargin` that can be stored."""
    import maxmargin

    reg = {}
    for name in dir(maxmargin):
        obj = getattr(maxmargin, name, None)
        if isinstance(obj, type) and hasattr(obj, "_state_attributes"):
            reg[name] = obj
    return reg


def _preprocessing_registry():
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler

    return {"StandardScaler": StandardScaler, "MinMaxScaler": MinMaxScaler, "MaxAbsScaler": MaxAbsScaler}


def _maxmargin_version():
    try:
        from importlib.metadata import version

        return version("maxmargin")
    except Exception:
        import maxmargin

        return str(getattr(maxmargin, "__version__", "unknown"))


# --------------------------------------------------------------------------- value encoding


class _Encoder:
    """Turns Python/NumPy values into tagged JSON plus named arrays."""

    def __init__(self):
        self.arrays = {}

    def encode(self, value, key, what):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            v = float(value)
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(value, np.str_):
            return str(value)
        if sp.issparse(value):
            m = sp.csr_matrix(value)
            m.sort_indices()
            for part in ("data", "indices", "indptr"):
                self._add(f"{key}.{part}", getattr(m, part), what)
            return {"$csr": {"key": key, "shape": [int(s) for s in m.shape]}}
        if isinstance(value, np.ndarray) and value.dtype.hasobject and all(isinstance(v, str) for v in value.flat):
            self._add(key, np.asarray(value.tolist(), dtype=np.str_).reshape(value.shape), what)
            return {"$strings": key}  # e.g. feature_names_in_: read back as an object array of str
        if isinstance(value, np.ndarray):
            self._add(key, value, what)
            return {"$array": key}
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, f"{key}.{i}", what) for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{key}.{i}", what) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {
                "$dict": [
                    [self.encode(k, f"{key}.k{i}", what), self.encode(v, f"{key}.{i}", what)]
                    for i, (k, v) in enumerate(value.items())
                ]
            }
        raise TypeError(f"{what} is a {type(value).__name__}, which a model file cannot store (data only, no code)")

    def _add(self, key, arr, what):
        arr = np.asarray(arr)
        if arr.dtype.hasobject:
            raise TypeError(f"{what} is an array of Python objects, which a model file cannot store")
        self.arrays[key] = np.ascontiguousarray(arr)


def _decode(value, arrays, where):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(v, arrays, where) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        ((tag, body),) = value.items()
        try:
            if tag == "$array":
                return arrays[body]
            if tag == "$strings":
                strings = arrays[body]
                if strings.dtype.kind != "U":
                    raise ValueError(f"{strings.dtype} is not a string dtype")
                return strings.astype(object)
            if tag == "$csr":
                k = body["key"]
                return sp.csr_matrix(
                    (arrays[k + ".data"], arrays[k + ".indices"], arrays[k + ".indptr"]), shape=tuple(body["shape"])
                )
            if tag == "$float":
                if body not in ("nan", "inf", "-inf"):
                    raise ValueError(body)
                return float(body)
            if tag == "$tuple":
                return tuple(_decode(v, arrays, where) for v in body)
            if tag == "$dict":
                return {_decode(k, arrays, where): _decode(v, arrays, where) for k, v in body}
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFormatError(f"damaged value in {where}: {tag} {exc}") from None
    raise ModelFormatError(f"unexpected value in {where}: {value!r:.80}")


# --------------------------------------------------------------------------- hashing


def _digest(meta, arrays):
    h = hashlib.sha256()
    body = {k: v for k, v in meta.items() if k != "sha256"}
    h.update(json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8"))
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        h.update(b"\x00" + key.encode("utf-8") + b"\x00" + a.dtype.str.encode() + repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- save


def _state_names(estimator):
    names = list(getattr(type(estimator), "_state_attributes", ()))
    for extra in _EXTRA_ATTRIBUTES:
        if extra not in names and hasattr(estimator, extra):
            names.append(extra)
    return names


def _clean_params(estimator):
    params = estimator.get_params(deep=False)
    if "callback" in params:  # a run-time hook, not part of the model
        params["callback"] = None
    if callable(params.get("kernel")):
        raise TypeError("a model with a callable kernel cannot be saved (a model file holds data, not code)")
    return params


def _split_pipeline(model):
    """(preprocessing steps [(name, transformer)], final estimator, step name)."""
    from sklearn.pipeline import Pipeline

    if isinstance(model, Pipeline):
        steps = list(model.steps)
        *pre, (last_name, last) = steps
        reg = _preprocessing_registry()
        for name, step in pre:
            if type(step).__name__ not in reg or type(step) is not reg[type(step).__name__]:
                raise TypeError(
                    f"pipeline step {name!r} ({type(step).__name__}) cannot be stored; "
                    f"supported preprocessing: {', '.join(sorted(reg))}"
                )
        return pre, last, last_name
    return [], model, None


def _encode_estimator(enc, estimator, prefix, state_names, kind):
    cls = type(estimator).__name__
    params = _clean_params(estimator) if kind == "estimator" else estimator.get_params(deep=False)
    out = {"class": cls, "params": {}, "attributes": {}}
    for k, v in params.items():
        out["params"][k] = enc.encode(v, f"{prefix}.param.{k}", f"parameter {k!r} of {cls}")
    for name in state_names:
        if not hasattr(estimator, name):
            raise ValueError(f"{cls} is not fitted (it has no attribute {name!r}); fit it before saving")
        out["attributes"][name] = enc.encode(
            getattr(estimator, name), f"{prefix}.{name}", f"attribute {name!r} of {cls}"
        )
    return out


def save_model(model, path, *, info=None):
    """Write a fitted estimator (or a Pipeline of scalers and an estimator) to ``path``.

    The write is atomic: a temporary file in the same directory is renamed over
    ``path`` only when complete.  ``info`` is an optional dict of JSON-like
    values stored with the model (for example the training file and fit time).
    Returns the metadata dict written.
    """
    pre, estimator, step_name = _split_pipeline(model)
    registry = estimator_registry()
    cls = type(estimator).__name__
    if registry.get(cls) is not type(estimator):
        raise TypeError(
            f"cannot save a {type(estimator).__module__}.{cls}: model files hold maxmargin estimators "
            f"({', '.join(sorted(registry)) or 'none available'})"
        )
    enc = _Encoder()
    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "maxmargin_version": _maxmargin_version(),
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "estimator": _encode_estimator(enc, estimator, "estimator", _state_names(estimator), "estimator"),
        "preprocessing": [],
        "info": enc.encode(dict(info or {}), "info", "info"),
    }
    if step_name is not None:
        meta["estimator"]["step"] = step_name
    for i, (name, step) in enumerate(pre):
        state = [k for k in vars(step) if k.endswith("_") and not k.startswith("_")]
        entry = _encode_estimator(enc, step, f"preprocessing.{i}", state, "preprocessing")
        entry["step"] = name
        meta["preprocessing"].append(entry)
    arrays = enc.arrays
    meta["sha256"] = _digest(meta, arrays)
    payload = dict(arrays)
    payload[META_KEY] = np.frombuffer(json.dumps(meta, allow_nan=False).encode("utf-8"), dtype=np.uint8)

    buf = io.BytesIO()
    np.savez_compressed(buf, **payload)
    data = _seal(buf.getvalue())

    def write(fh):
        fh.write(data)

    atomic_write(path, write)
    return meta


def _seal(data):
    """Add the zip comment ``maxmargin-sha256:<hex>``: the SHA-256 of every byte before it."""
    if data[-22:-18] != b"PK\x05\x06" or data[-2:] != b"\x00\x00":  # pragma: no cover - numpy's zip layout
        raise RuntimeError("unexpected zip layout while writing a model file")
    comment_len = len(SEAL_PREFIX) + 64
    body = data[:-2] + comment_len.to_bytes(2, "little")
    return body + SEAL_PREFIX + hashlib.sha256(body).hexdigest().encode("ascii")


def _check_seal(raw, p):
    n = len(SEAL_PREFIX) + 64
    tail = raw[-n:]
    if len(raw) < n + 22 or not tail.startswith(SEAL_PREFIX) or raw[-n - 22 : -n - 18] != b"PK\x05\x06":
        raise ModelFormatError("damaged or truncated model file (no file checksum at the end)", p)
    if hashlib.sha256(raw[:-n]).hexdigest().encode("ascii") != tail[len(SEAL_PREFIX) :]:
        raise ModelFormatError("checksum mismatch: the file was changed or damaged after it was written", p)


# --------------------------------------------------------------------------- load


def _read_archive(path):
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"{p}: no such file")
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p}: is a directory, not a model file")
    with open(p, "rb") as fh:
        raw = fh.read()
    if not raw:
        raise ModelFormatError("the file is empty", p)
    if not raw.startswith(ZIP_MAGIC):
        if raw.lstrip().startswith(b"svm_type"):
            raise ModelFormatError("this is a LIBSVM model file: read it with load_libsvm_model", p)
        raise ModelFormatError("not a maxmargin model file (it does not start like one)", p)
    _check_seal(raw, p)
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            if META_KEY not in npz.files:
                raise ModelFormatError("not a maxmargin model file (no metadata entry)", p)
            arrays = {k: npz[k] for k in npz.files}
    except ModelFormatError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError, NotImplementedError) as exc:
        raise ModelFormatError(f"damaged or truncated model file ({type(exc).__name__}: {exc})", p) from None
    raw_meta = arrays.pop(META_KEY)
    try:
        meta = json.loads(raw_meta.astype(np.uint8, copy=False).tobytes().decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"damaged metadata ({exc})", p) from None
    if meta.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"not a maxmargin model file (format {meta.get('format')!r})", p)
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFormatError(f"invalid format version {version!r}", p)
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"written by a newer maxmargin (format version {version}, "
            f"maxmargin {meta.get('maxmargin_version', '?')}); this maxmargin reads format versions up to "
            f"{FORMAT_VERSION}: upgrade maxmargin to load it",
            p,
        )
    if meta.get("sha256") != _digest(meta, arrays):
        raise ModelFormatError("checksum mismatch: the file was changed or damaged after it was written", p)
    meta["info"] = _decode(meta.get("info", {"$dict": []}), arrays, "info")
    return meta, arrays


def read_model_metadata(path):
    """The verified metadata dict of a model file (see the module docstring)."""
    meta, _ = _read_archive(path)
    return meta


def _build(entry, arrays, registry, p, what):
    cls_name = entry.get("class")
    cls = registry.get(cls_name)
    if cls is None:
        raise ModelFormatError(
            f"{what} class {cls_name!r} is not available in this version of maxmargin "
            f"(known: {', '.join(sorted(registry))})",
            p,
        )
    params = {k: _decode(v, arrays, f"parameter {k}") for k, v in entry.get("params", {}).items()}
    valid = set(cls().get_params(deep=False))
    unknown = sorted(set(params) - valid)
    if unknown:
        raise ModelFormatError(f"{cls_name} in this maxmargin has no parameter(s) {', '.join(unknown)}", p)
    obj = cls(**params)
    listed = getattr(cls, "_state_attributes", None)
    for name, v in entry.get("attributes", {}).items():
        if listed is not None:  # an estimator: only the attributes its class declares
            ok = name in listed or name in _EXTRA_ATTRIBUTES
        else:  # a scaler: scikit-learn's public fitted attributes
            ok = isinstance(name, str) and name.isidentifier() and name.endswith("_") and not name.startswith("_")
        if not ok:
            raise ModelFormatError(f"{cls_name} in this maxmargin has no stored attribute {name!r}", p)
        setattr(obj, name, _decode(v, arrays, f"attribute {name}"))
    return obj


def load_model(path, *, return_metadata=False):
    """Load a model written by :func:`save_model`.

    Returns the estimator (or a :class:`~sklearn.pipeline.Pipeline` when the
    file holds preprocessing steps); with ``return_metadata=True`` a pair
    ``(model, metadata)``.

    Raises :class:`~maxmargin.io.ModelFormatError` for a file that is not a
    model, damaged, truncated, changed after writing, or of a newer format.
    """
    p = os.fspath(path)
    meta, arrays = _read_archive(p)
    try:
        est_entry = meta["estimator"]
        pre_entries = meta.get("preprocessing", [])
        estimator = _build(est_entry, arrays, estimator_registry(), p, "estimator")
        steps = [
            (e.get("step", f"step{i}"), _build(e, arrays, _preprocessing_registry(), p, "preprocessing"))
            for i, e in enumerate(pre_entries)
        ]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ModelFormatError(f"incomplete metadata ({type(exc).__name__}: {exc})", p) from None
    model = estimator
    if steps:
        from sklearn.pipeline import Pipeline

        model = Pipeline(steps + [(est_entry.get("step", "svm"), estimator)])
    if return_metadata:
        return model, meta
    return model
