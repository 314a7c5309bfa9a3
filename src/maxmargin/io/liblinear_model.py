"""LIBLINEAR text model files, read and written (``liblinear-official``'s ``load_model`` / ``save_model``).

The format: a header of ``key value`` lines, then ``w`` and the weights::

    solver_type L2R_L2LOSS_SVC_DUAL
    nr_class 3
    label 2 1 3          (classification only: the labels, in LIBLINEAR's order)
    nr_feature 123
    bias 1               (-1: no bias feature)
    w
    <nr_w numbers>       (one line per feature, then one for the bias feature when bias >= 0)

``nr_w`` is 1 for two classes (the decision value is positive for the *first* label) and for regression, and
``nr_class`` otherwise (also for Crammer-Singer with two classes); column ``j`` belongs to ``label[j]``.  The
intercept is ``bias`` times the bias feature's weight.

:func:`load_liblinear_model` returns a fitted :class:`maxmargin.LinearSVC` / :class:`maxmargin.LinearSVR` with
``classes_`` sorted as scikit-learn keeps them; :func:`save_liblinear_model` writes one of ours (labels must be
integers, as LIBLINEAR reads them with ``%d``).  Logistic-regression and one-class models are refused.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ._atomic import atomic_write
from .errors import ModelFormatError

__all__ = ["is_liblinear_model", "load_liblinear_model", "save_liblinear_model"]

_PARAMS = {
    "L2R_L2LOSS_SVC_DUAL": ("svc", 1, {"penalty": "l2", "loss": "squared_hinge", "dual": True}),
    "L2R_L2LOSS_SVC": ("svc", 2, {"penalty": "l2", "loss": "squared_hinge", "dual": False}),
    "L2R_L1LOSS_SVC_DUAL": ("svc", 3, {"penalty": "l2", "loss": "hinge", "dual": True}),
    "MCSVM_CS": ("svc", 4, {"multi_class": "crammer_singer"}),
    "L1R_L2LOSS_SVC": ("svc", 5, {"penalty": "l1", "loss": "squared_hinge", "dual": False}),
    "L2R_L2LOSS_SVR": ("svr", 11, {"loss": "squared_epsilon_insensitive", "dual": False}),
    "L2R_L2LOSS_SVR_DUAL": ("svr", 12, {"loss": "squared_epsilon_insensitive", "dual": True}),
    "L2R_L1LOSS_SVR_DUAL": ("svr", 13, {"loss": "epsilon_insensitive", "dual": True}),
}
_OTHER = {"L2R_LR", "L1R_LR", "L2R_LR_DUAL", "ONECLASS_SVM"}


def is_liblinear_model(path):
    """Whether ``path`` starts like a LIBLINEAR model file."""
    try:
        with open(path, "rb") as fh:
            return fh.read(64).lstrip().startswith(b"solver_type")
    except OSError:
        return False


def _fmt(v):
    return f"{float(v):.17g}"


def load_liblinear_model(path):
    """Read a LIBLINEAR model file; returns a fitted :class:`~maxmargin.LinearSVC` or
    :class:`~maxmargin.LinearSVR` (raises :class:`~maxmargin.io.ModelFormatError` for a damaged or
    unsupported file)."""
    from ..linear import LinearSVC, LinearSVR

    p = os.fspath(path)
    with open(p, encoding="ascii", errors="replace") as fh:
        lines = fh.read().splitlines()
    header = {}
    k = 0
    while k < len(lines) and lines[k].strip() != "w":
        parts = lines[k].split()
        if parts:
            header[parts[0]] = parts[1:]
        k += 1
    if k == len(lines):
        raise ModelFormatError("not a LIBLINEAR model file (no 'w' line)", p)
    try:
        stype = header["solver_type"][0]
        nr_class = int(header["nr_class"][0])
        nr_feature = int(header["nr_feature"][0])
        bias = float(header.get("bias", ["-1"])[0])
    except (KeyError, IndexError, ValueError) as exc:
        raise ModelFormatError(f"damaged LIBLINEAR header ({type(exc).__name__}: {exc})", p) from None
    if stype in _OTHER:
        raise ModelFormatError(
            f"solver_type {stype} is not a support vector machine; maxmargin reads LIBLINEAR's "
            f"SVM models ({', '.join(_PARAMS)})",
            p,
        )
    if stype not in _PARAMS:
        raise ModelFormatError(f"unknown solver_type {stype!r}", p)
    kind, number, params = _PARAMS[stype]
    labels = None
    if kind == "svc":
        try:
            labels = np.array([int(v) for v in header["label"]], dtype=np.int64)
        except (KeyError, ValueError) as exc:
            raise ModelFormatError(f"damaged label line ({type(exc).__name__}: {exc})", p) from None
        if labels.shape[0] != nr_class or nr_class < 2:
            raise ModelFormatError(f"nr_class {nr_class} but {labels.shape[0]} labels", p)
    nr_w = 1 if kind == "svr" or (nr_class == 2 and number != 4) else nr_class
    n_rows = nr_feature + (1 if bias >= 0 else 0)
    try:
        values = [float(v) for line in lines[k + 1 :] for v in line.split()]
    except ValueError as exc:
        raise ModelFormatError(f"damaged weights ({exc})", p) from None
    if len(values) != n_rows * nr_w:
        raise ModelFormatError(f"expected {n_rows * nr_w} weights ({n_rows} rows of {nr_w}), found {len(values)}", p)
    W = np.array(values).reshape(n_rows, nr_w).T  # (nr_w, n_rows)
    coef = W[:, :nr_feature]
    intercept = bias * W[:, nr_feature] if bias >= 0 else np.zeros(nr_w)
    fit_intercept = bias > 0
    common = {"fit_intercept": fit_intercept, "intercept_scaling": bias if bias > 0 else 1.0}
    if kind == "svr":
        est = LinearSVR(**params, **common)
        est.coef_ = np.ascontiguousarray(coef[0])
        est.intercept_ = intercept[:1].copy() if fit_intercept else 0.0
    else:
        est = LinearSVC(**params, **common)
        classes = np.sort(labels)
        if nr_w == 1:
            sign = 1.0 if labels[0] == classes[1] else -1.0
            coef, intercept = sign * coef, sign * intercept
        else:
            order = [int(np.flatnonzero(labels == c)[0]) for c in classes]
            coef, intercept = coef[order], intercept[order]
            if number == 4 and nr_class == 2:
                coef, intercept = coef[1:] - coef[:1], intercept[1:] - intercept[:1]
        est.classes_ = classes
        est.coef_ = np.asfortranarray(coef)  # as LinearSVC.fit leaves it
        est.intercept_ = intercept.copy() if fit_intercept else 0.0
    rows = np.atleast_2d(est.coef_)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    est.n_features_in_ = nr_feature
    est.solver_type_ = number
    est.n_iter_ = 0
    est.objective_ = np.full(rows.shape[0], np.nan)
    est.duality_gap_ = np.full(rows.shape[0], np.nan)
    with np.errstate(divide="ignore"):
        est.margin_ = np.where(norms > 0, 1.0 / np.maximum(norms, 1e-300), np.inf)
    est.fit_status_ = 0
    est.fit_time_ = float("nan")
    return est


def save_liblinear_model(estimator, path):
    """Write a fitted :class:`~maxmargin.LinearSVC` or :class:`~maxmargin.LinearSVR` as a LIBLINEAR model file
    (atomically).  LIBLINEAR reads integer labels only: other labels raise ValueError."""
    from ..linear import SOLVER_NAMES, LinearSVC, LinearSVR

    if not isinstance(estimator, (LinearSVC, LinearSVR)) or not hasattr(estimator, "coef_"):
        raise TypeError("save_liblinear_model needs a fitted maxmargin.LinearSVC or LinearSVR")
    number = int(getattr(estimator, "solver_type_", 0))
    if number not in SOLVER_NAMES:
        raise ValueError(f"unknown solver_type_ {number!r}")
    fit_intercept = bool(estimator.fit_intercept)
    bias = float(estimator.intercept_scaling) if fit_intercept else -1.0
    coef = np.atleast_2d(np.asarray(estimator.coef_, dtype=np.float64))
    nf = coef.shape[1]
    intercept = np.broadcast_to(np.asarray(estimator.intercept_, dtype=np.float64), (coef.shape[0],))
    out = [f"solver_type {SOLVER_NAMES[number]}"]
    if isinstance(estimator, LinearSVR):
        out.append("nr_class 2")
        cols = coef
        icpt = intercept
    else:
        classes = np.asarray(estimator.classes_)
        labels = []
        for c in classes:
            if (
                isinstance(c, (bool, np.bool_))
                or not isinstance(c, (int, np.integer, float, np.floating))
                or not math.isfinite(float(c))
                or float(c) != int(c)
            ):
                raise ValueError(f"LIBLINEAR model files hold integer labels; label {c!r} is not one")
            labels.append(int(c))
        k = len(labels)
        if k == 2 and number == 4:  # ours keeps one decision function; LIBLINEAR wants both classes' weights
            order = [labels[0], labels[1]]
            cols = np.vstack([-0.5 * coef[0], 0.5 * coef[0]])
            icpt = np.array([-0.5 * intercept[0], 0.5 * intercept[0]])
        elif k == 2:
            order = [labels[1], labels[0]]
            cols, icpt = coef, intercept
        else:
            order = labels
            cols, icpt = coef, intercept
        out.append(f"nr_class {k}")
        out.append("label " + " ".join(str(v) for v in order))
    out.append(f"nr_feature {nf}")
    out.append(f"bias {_fmt(bias)}")
    out.append("w")
    body = [" ".join(_fmt(v) for v in cols[:, j]) + " " for j in range(nf)]
    if bias >= 0:
        b = icpt / bias
        body.append(" ".join(_fmt(v) for v in b) + " ")
    text = "\n".join(out + body) + "\n"

    def write(fh):
        fh.write(text.encode("ascii"))

    atomic_write(path, write)
