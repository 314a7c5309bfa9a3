"""Small datasets shipped inside the package.

``heart_scale``
    The Statlog (Heart) data set as scaled to [-1, 1] by the LIBSVM authors and
    distributed with LIBSVM as its example file: 270 patients, 13 features,
    labels +1 (heart disease, 120) and -1 (none, 150).  Source: UCI Machine
    Learning Repository, Statlog (Heart); LIBSVM's ``heart_scale``.

On the command line a bundled data set is named ``builtin:NAME`` (for example
``maxmargin train builtin:heart_scale --cv 5``), or just ``NAME`` when no file of
that name exists in the current directory; ``maxmargin datasets`` lists them.
"""

from __future__ import annotations

import os
from importlib import resources

__all__ = ["DATASETS", "PREFIX", "dataset_path", "heart_scale_path", "load_heart_scale", "resolve_data_path"]

#: name -> (file in maxmargin/data, one-line description)
DATASETS = {
    "heart_scale": (
        "heart_scale",
        (
            "LIBSVM's example: Statlog (Heart), 270 samples, 13 features scaled to "
            "[-1, 1], labels +1 / -1 (LIBSVM format)"
        ),
    ),
}
#: how a command-line argument names a bundled data set explicitly
PREFIX = "builtin:"


def dataset_path(name):
    """Path of the bundled data set ``name`` (see :data:`DATASETS`); ValueError for an unknown name."""
    if name not in DATASETS:
        raise ValueError(f"no bundled data set named {name!r}; bundled: {', '.join(sorted(DATASETS))}")
    return os.fspath(resources.files("maxmargin").joinpath("data", DATASETS[name][0]))


def resolve_data_path(arg):
    """The file a data argument of the command line names: ``builtin:NAME`` is the bundled data set
    NAME; a bare NAME of a bundled data set is it too, unless a file of that name exists (the file
    wins).  Anything else is returned unchanged."""
    text = os.fspath(arg)
    if text.startswith(PREFIX):
        return dataset_path(text[len(PREFIX) :])
    if text in DATASETS and not os.path.exists(text):
        return dataset_path(text)
    return text


def heart_scale_path():
    """Path of the embedded ``heart_scale`` file (LIBSVM format)."""
    return resources.files("maxmargin").joinpath("data", "heart_scale")


def load_heart_scale(*, sparse=False):
    """Load LIBSVM's ``heart_scale`` example: ``(X, y)``.

    ``X`` is a dense ``(270, 13)`` float array (a CSR matrix with
    ``sparse=True``); ``y`` holds the labels ``+1.0`` / ``-1.0``.
    """
    from .io.data import load_data

    with resources.as_file(heart_scale_path()) as path:
        X, y = load_data(path, format="libsvm", n_features=13)
    if not sparse:
        X = X.toarray()
    return X, y
