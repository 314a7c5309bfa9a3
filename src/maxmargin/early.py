r"""The routed level-k model of ``SVC(solver='divide', solver_options={'early_stop': k})``.

DC-SVM's *early prediction* (:mod:`maxmargin.solvers.divide`): the fit stops after level
``k`` and keeps one binary model per part, :math:`f_P(x) = \sum_{i\in P}\alpha_iy_iK(x_i,x)
- \rho_P`.  A point :math:`x` is routed to the part whose kernel k-means centre is nearest in
feature space (the centres are means of a sample of training rows, :func:`~maxmargin.solvers.
divide.nearest_centre`) and gets that part's value.  An approximation of the SVM, not the SVM.

The estimator keeps, as plain arrays (model files store them as data):

``_early_sample`` (m, d)
    the sample rows the centres are made of;
``_early_sample_labels`` (m,), ``_early_centre_sq`` (n_clusters,)
    each sample row's first-level cluster, and each centre's squared norm;
``_early_cluster_group`` (n_clusters,)
    the part at the early level of each first-level cluster;
``_early_rho`` (n_parts,), ``_early_sv_group`` (n_SV,)
    each part's offset, and the part of each support vector.

All are None for every other fit.
"""

from __future__ import annotations

import numpy as np

from .kernels import densify_if_cheap
from .kernels.objects import block_rows_for

_EARLY_ATTRIBUTES = (
    "_early_sample",
    "_early_sample_labels",
    "_early_centre_sq",
    "_early_cluster_group",
    "_early_rho",
    "_early_sv_group",
)


def set_early_model(est, early, rows):
    """Set (or clear, ``early=None``) the routed model on a fitted binary estimator;
    ``rows`` are the training rows of the binary problem, in its variables' order."""
    if early is None:
        for name in _EARLY_ATTRIBUTES:
            setattr(est, name, None)
        return
    group = np.full(est.shape_fit_[0], -1, dtype=np.int64)
    group[rows] = early["var_group"]
    est._early_sample = np.asarray(early["sample"], dtype=np.float64)
    est._early_sample_labels = np.asarray(early["sample_labels"], dtype=np.int64)
    est._early_centre_sq = np.asarray(early["centre_sq"], dtype=np.float64)
    est._early_cluster_group = np.asarray(early["cluster_group"], dtype=np.int64)
    est._early_rho = np.asarray(early["rho"], dtype=np.float64)
    est._early_sv_group = group[est.support_]


def early_parts(est, X):
    """The part (at the early level) each row of ``X`` is routed to."""
    from .solvers.divide import assign

    cluster = assign(
        X,
        est._get_kernel(),
        est._early_sample,
        est._early_sample_labels,
        est._early_centre_sq,
        est._early_centre_sq.shape[0],
    )
    return est._early_cluster_group[cluster]


def early_decision(est, X):
    """One-vs-one decision values (n, 1) of the routed model, in the estimator's layout
    (positive for ``classes_[1]``): :math:`-f_{P(x)}(x)`.  The rows are grouped by part and
    each group meets its own part's support vectors only (about 1/parts of the kernel
    values of a product with all of them)."""
    part = early_parts(est, X)
    SV = densify_if_cheap(est.support_vectors_)
    coef = est.dual_coef_[0]
    kern = est._get_kernel()
    out = np.empty((X.shape[0], 1))
    sv_order = np.argsort(est._early_sv_group, kind="stable")
    sv_bounds = np.searchsorted(est._early_sv_group[sv_order], np.arange(est._early_rho.shape[0] + 1))
    row_order = np.argsort(part, kind="stable")
    row_bounds = np.searchsorted(part[row_order], np.arange(est._early_rho.shape[0] + 1))
    for g in range(est._early_rho.shape[0]):
        rows = row_order[row_bounds[g] : row_bounds[g + 1]]
        if rows.size == 0:
            continue
        svs = sv_order[sv_bounds[g] : sv_bounds[g + 1]]
        if svs.size == 0:
            out[rows, 0] = est._early_rho[g]
            continue
        SVg, cg = SV[svs], coef[svs]
        step = block_rows_for(svs.size)
        for s in range(0, rows.size, step):
            r = rows[s : s + step]
            K = np.asarray(kern(X[r], SVg))
            out[r, 0] = np.einsum("ij,j->i", K, cg) + est._early_rho[g]  # row by row: blocks give the same
    return out
