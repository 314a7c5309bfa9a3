"""Files in and out: data (CSV, LIBSVM/svmlight), maxmargin model files, LIBSVM model files.

* :func:`load_data` / :func:`read_data` -- :mod:`maxmargin.io.data`
* :func:`save_model` / :func:`load_model` -- :mod:`maxmargin.io.model` (the format is documented there)
* :func:`load_libsvm_model` / :func:`save_libsvm_model` -- :mod:`maxmargin.io.libsvm_model`
* :func:`load_liblinear_model` / :func:`save_liblinear_model` -- :mod:`maxmargin.io.liblinear_model`
* :func:`load_any_model` -- any of these model files, recognised from its first bytes
"""

from __future__ import annotations

from .data import Dataset, detect_format, load_data, read_data
from .errors import DataFormatError, ModelFormatError
from .liblinear_model import is_liblinear_model, load_liblinear_model, save_liblinear_model
from .libsvm_model import is_libsvm_model, load_libsvm_model, save_libsvm_model
from .model import FORMAT_VERSION, load_model, read_model_metadata, save_model

__all__ = [
    "DataFormatError",
    "ModelFormatError",
    "Dataset",
    "load_data",
    "read_data",
    "detect_format",
    "save_model",
    "load_model",
    "read_model_metadata",
    "FORMAT_VERSION",
    "load_libsvm_model",
    "save_libsvm_model",
    "is_libsvm_model",
    "load_any_model",
    "load_liblinear_model",
    "save_liblinear_model",
    "is_liblinear_model",
]


def load_any_model(path):
    """Load a maxmargin model file or a LIBSVM model file; return ``(model, kind)``.

    ``kind`` is ``'maxmargin'``, ``'libsvm'`` or ``'liblinear'``.
    """
    if is_libsvm_model(path):
        return load_libsvm_model(path), "libsvm"
    if is_liblinear_model(path):
        return load_liblinear_model(path), "liblinear"
    return load_model(path), "maxmargin"
