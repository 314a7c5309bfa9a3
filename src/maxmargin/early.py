r"""The routed level-k model of ``SVC(solver='divide', solver_options={'early_stop': k})``.

DC-SVM's *early prediction* (:mod:`maxmargin.solvers.divide`): the fit stops after level
``k`` and keeps one binary model per part, :math:`f_P(x) = \sum_{i\in P}\alpha_iy_iK(x_i,x)
- \rho_P`.  A point :math:`x` is routed to the part whose kernel k-means centre is nearest in
feature space (the centres are means of a sample of training rows, :func:`~maxmargin.solvers.
divide.nearest_centre`) and gets that part's value -- or, where the fit chose a blend
(``early_blend='auto'``), the weighted mean of its nearest parts' values.  An approximation of
the SVM, not the SVM.

``train_error_`` of such a model is each training row's error under its own part's model (the
value the part's solver left; a blend's training values would cost a kernel product of every
row with its neighbouring parts' support vectors).  With a blend, the fit's report
(``extra['divide']``, the last level's ``blend``) holds the blend's and the nearest part's
error on the rows held out of the parts.

The estimator keeps, as plain arrays (model files store them as data):

``_early_sample`` (m, d)
    the sample rows the centres are made of;
``_early_sample_labels`` (m,), ``_early_centre_sq`` (n_clusters,)
    each sample row's first-level cluster, and each centre's squared norm;
``_early_cluster_group`` (n_clusters,)
    the part at the early level of each first-level cluster;
``_early_rho`` (n_parts,), ``_early_sv_group`` (n_SV,)
    each part's offset, and the part of each support vector;
``_early_blend`` (2,)
    ``(t, T)``: the value of a point is the blend of its ``t`` nearest parts' values at
    temperature ``T`` (:func:`~maxmargin.solvers.divide.blend_weights`); ``(1, 0)`` (and a
    model file without it): the nearest part's value alone.

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
    "_early_blend",
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
    top, T = early.get("blend", (1, 0.0))
    est._early_blend = np.array([float(top), float(T)])


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


def _blend(est):
    blend = getattr(est, "_early_blend", None)
    return (1, 0.0) if blend is None else (int(blend[0]), float(blend[1]))


def early_decision(est, X):
    """One-vs-one decision values (n, 1) of the routed model, in the estimator's layout
    (positive for ``classes_[1]``): :math:`-f_{P(x)}(x)`, or the blend of the nearest parts'
    values.  The rows are grouped by part and each group meets its own part's support
    vectors only (about 1/parts of the kernel values of a product with all of them; a
    blend of ``t`` parts up to ``t`` times that)."""
    top, T = _blend(est)
    if top > 1:
        return _blended_decision(est, X, top, T)
    n = X.shape[0]
    return _part_values(est, X, densify_if_cheap(est.support_vectors_), early_parts(est, X), np.arange(n), np.ones(n))


def _blended_decision(est, X, top, T):
    from .solvers.divide import ASSIGN_BLOCK, assign, blend_weights, group_distances

    n_groups = est._early_rho.shape[0]
    out = np.zeros((X.shape[0], 1))
    SV = densify_if_cheap(est.support_vectors_)
    step = 8 * ASSIGN_BLOCK
    for s in range(0, X.shape[0], step):
        Xb = X[s : s + step]
        dist = assign(
            Xb,
            est._get_kernel(),
            est._early_sample,
            est._early_sample_labels,
            est._early_centre_sq,
            est._early_centre_sq.shape[0],
            True,
        )
        parts, w = blend_weights(group_distances(dist, est._early_cluster_group, n_groups), top, T)
        r, c = np.nonzero(w > 0)
        out[s : s + step] = _part_values(est, Xb, SV, parts[r, c], r, w[r, c])
    return out


def _part_values(est, X, SV, part, row, weight):
    """(n, 1): for each row of ``X``, the sum of ``weight[k] * (its value in part[k]'s model)``
    over the terms ``k`` with ``row[k]`` the row (a row at most once a part); grouped by part."""
    coef = est.dual_coef_[0]
    kern = est._get_kernel()
    out = np.zeros((X.shape[0], 1))
    sv_order = np.argsort(est._early_sv_group, kind="stable")
    sv_bounds = np.searchsorted(est._early_sv_group[sv_order], np.arange(est._early_rho.shape[0] + 1))
    row_order = np.argsort(part, kind="stable")
    row_bounds = np.searchsorted(part[row_order], np.arange(est._early_rho.shape[0] + 1))
    for g in range(est._early_rho.shape[0]):
        terms = row_order[row_bounds[g] : row_bounds[g + 1]]
        if terms.size == 0:
            continue
        rows, wg = row[terms], weight[terms]  # a row appears once in a part's terms
        svs = sv_order[sv_bounds[g] : sv_bounds[g + 1]]
        if svs.size == 0:
            out[rows, 0] += wg * est._early_rho[g]
            continue
        SVg, cg = SV[svs], coef[svs]
        step = block_rows_for(svs.size)
        for s in range(0, rows.size, step):
            r = rows[s : s + step]
            K = np.asarray(kern(X[r], SVg))
            # row by row: blocks give the same
            out[r, 0] += wg[s : s + step] * (np.einsum("ij,j->i", K, cg) + est._early_rho[g])
    return out
