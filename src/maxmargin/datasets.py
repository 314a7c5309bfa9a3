"""Small datasets shipped inside the package.

``heart_scale``
    The Statlog (Heart) data set as scaled to [-1, 1] by the LIBSVM authors and
    distributed with LIBSVM as its example file: 270 patients, 13 features,
    labels +1 (heart disease, 120) and -1 (none, 150).  Source: UCI Machine
    Learning Repository, Statlog (Heart); LIBSVM's ``heart_scale``.
"""
from __future__ import annotations

from importlib import resources

__all__ = ["load_heart_scale", "heart_scale_path"]


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
