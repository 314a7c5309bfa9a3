r"""Crammer-Singer multi-class SVM by dual coordinate descent (LIBLINEAR's solver 4; Keerthi, Sundararajan,
Chang, Hsieh and Lin, KDD 2008).

Primal, classes :math:`m = 1..k`, per-sample :math:`C_i`, with :math:`e_i^m = 0` for :math:`m = y_i` and 1
otherwise:

.. math:: \min_{w_1..w_k}\ \tfrac12\sum_m w_m\cdot w_m + \sum_i C_i \max_m\big(e_i^m + w_m\cdot x_i - w_{y_i}\cdot x_i\big).

Dual: :math:`\min_\alpha \tfrac12\sum_m \|w_m\|^2 + \sum_{i,m} e_i^m\alpha_i^m` with
:math:`w_m = \sum_i \alpha_i^m x_i`, subject to :math:`\sum_m \alpha_i^m = 0` and :math:`\alpha_i^m \le C_i^m`
(:math:`C_i^{y_i} = C_i`, else 0).  One step solves the sub-problem of one sample exactly: with
:math:`A = \|x_i\|^2`, :math:`G_m = w_m\cdot x_i + e_i^m` and :math:`B_m = G_m - A\alpha_i^m`, the minimiser of
:math:`\tfrac12 A\|\alpha_i\|^2 + B\cdot\alpha_i` on the constraints is

.. math:: \alpha_i^m = \min\big(C_i^m,\ (\beta - B_m)/A\big),

with :math:`\beta` the root of :math:`\sum_m \min(D_m, \beta) = \sum_m B_m`, :math:`D_m = B_m + A C_i^m`: sort
:math:`D` decreasingly and take :math:`\beta = (\sum_{m<r} D_m - A C_i)/r` for the first :math:`r` with
:math:`\beta \ge D_r`.  Samples are visited in a random order each epoch; the optimality violation of sample
:math:`i` is :math:`\max_m G_m - \min_{m:\ \alpha_i^m < C_i^m} G_m`, and the solver stops when the largest of an
epoch is at most ``tol``.  (LIBLINEAR also shrinks classes and samples; this solver visits every sample.)
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from ._linear_common import (
    drive,
    prefetch_entries,
    prefetch_plan,
    prefetch_row,
    prefetch_staged,
    rand_below,
    rng_state,
    row_sqnorms,
)

INF = np.inf


@njit(cache=True, nogil=True, inline="always")
def _scores(i, Wt, Xd, data, indices, indptr, dense, nf, bias, out):
    """``out[m] = w_m . x_i`` for every class from the feature-major weights ``Wt`` (n_weights, k): one pass over
    the row, reading each feature's k weights side by side.  (Class-major weights made every (feature, class)
    pair a cache miss of its own once the weights outgrew the cache: text100's 100 x 50,001 weights, 40 MB, took
    0.67 s an epoch.)"""
    k = out.shape[0]
    for m in range(k):
        out[m] = 0.0
    if dense:
        for f in range(nf):
            v = Xd[i, f]
            Wf = Wt[f]
            for m in range(k):
                out[m] += v * Wf[m]
    else:
        for p in range(uint64(indptr[i]), uint64(indptr[i + 1])):
            v = data[p]
            Wf = Wt[indices[p]]
            for m in range(k):
                out[m] += v * Wf[m]
    if bias > 0:
        Wf = Wt[nf]
        for m in range(k):
            out[m] += bias * Wf[m]


@njit(cache=True, nogil=True, inline="always")
def _add_changes(Wf, v, changed, dm, nch):
    """Feature ``f``'s weights ``Wf`` += v * (the changes ``dm`` of the classes ``changed``)."""
    for c in range(nch):
        Wf[changed[c]] += dm[c] * v


@njit(cache=True, nogil=True, error_model="numpy")
def _epochs(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    y,
    C,
    A,
    alpha,
    Wt,
    index,
    istate,
    fstate,
    rng,
    tol,
    n_epochs,
    ahead,
    stages,
    entries,
):
    """Wt: (n_weights, k) weights, a feature's k weights side by side; alpha: (n, k).  istate = [iteration];
    fstate = [violation].  0 when converged."""
    n = y.shape[0]
    k = Wt.shape[1]
    G = np.empty(k)
    dm = np.empty(k)
    changed = np.empty(k, dtype=np.int64)
    B = np.empty(k)
    D = np.empty(k)
    new = np.empty(k)
    for _ in range(n_epochs):
        for s in range(n):
            j = s + rand_below(rng, n - s)
            t = index[s]
            index[s] = index[j]
            index[j] = t
        viol_max = 0.0
        for s in range(n):
            i = index[s]
            if stages == 1:
                if s + 2 < n:
                    prefetch_row(index[s + 2], Xd, data, indices, indptr, dense)
                    prefetch_entries(index, s, 2, n, A, C, y, A, A)
            elif stages > 1:  # (0: data small enough to stay in the core's cache, no prefetch)
                prefetch_staged(index, s, n, ahead, stages, Xd, data, indices, indptr, dense, False, A)
                prefetch_entries(index, s, entries, n, A, C, y, A, A)
            Ai = A[i]
            if Ai <= 0.0:
                continue
            yi = y[i]
            Ci = C[i]
            _scores(i, Wt, Xd, data, indices, indptr, dense, nf, bias, G)
            for m in range(k):
                G[m] += 0.0 if m == yi else 1.0
            gmax = -INF
            gmin = INF
            for m in range(k):
                gmax = max(gmax, G[m])
                cap = Ci if m == yi else 0.0
                if alpha[i, m] < cap and G[m] < gmin:
                    gmin = G[m]
            v = gmax - gmin
            viol_max = max(viol_max, v)
            if v <= 1e-12:
                continue
            for m in range(k):
                B[m] = G[m] - Ai * alpha[i, m]
                D[m] = B[m]
            D[yi] += Ai * Ci
            # sort D decreasingly (k is small: insertion sort)
            for a in range(1, k):
                x = D[a]
                b = a - 1
                while b >= 0 and D[b] < x:
                    D[b + 1] = D[b]
                    b -= 1
                D[b + 1] = x
            beta = D[0] - Ai * Ci
            r = 1
            while r < k and beta < r * D[r]:
                beta += D[r]
                r += 1
            beta /= r
            for m in range(k):
                cap = Ci if m == yi else 0.0
                a_new = (beta - B[m]) / Ai
                a_new = min(a_new, cap)
                new[m] = a_new
            nch = 0
            for m in range(k):
                d = new[m] - alpha[i, m]
                if d != 0.0:
                    alpha[i, m] = new[m]
                    changed[nch] = m
                    dm[nch] = d
                    nch += 1
            if nch > 0:
                if dense:
                    for f in range(nf):
                        _add_changes(Wt[f], Xd[i, f], changed, dm, nch)
                else:
                    for p in range(uint64(indptr[i]), uint64(indptr[i + 1])):
                        _add_changes(Wt[indices[p]], data[p], changed, dm, nch)
                if bias > 0:
                    _add_changes(Wt[nf], bias, changed, dm, nch)
        istate[0] += 1
        fstate[0] = viol_max
        if viol_max <= tol:
            return 0
    return 1


@njit(cache=True, nogil=True)
def _primal(Xd, data, indices, indptr, dense, nf, bias, y, C, Wt):
    """The primal objective at the feature-major weights ``Wt`` (n_weights, k)."""
    n = y.shape[0]
    k = Wt.shape[1]
    f = 0.0
    for m in range(k):
        for j in range(Wt.shape[0]):
            f += 0.5 * Wt[j, m] * Wt[j, m]
    G = np.empty(k)
    for i in range(n):
        yi = y[i]
        _scores(i, Wt, Xd, data, indices, indptr, dense, nf, bias, G)
        own = G[yi]
        worst = 0.0
        for m in range(k):
            if m != yi:
                v = 1.0 + G[m] - own
                worst = max(worst, v)
        f += C[i] * worst
    return f


def solve(
    ld,
    y,
    n_classes,
    C,
    *,
    tol=0.1,
    max_iter=1000,
    seed=0,
    alpha0=None,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
):
    """Crammer-Singer on ``ld`` (:class:`~maxmargin.solvers._linear_common.LinearData`) with class indices ``y``
    (0..k-1) and per-sample ``C``.  ``alpha0`` (n, k): a warm start.  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` whose ``w`` is (k, n_weights) and ``dual`` is alpha (the epochs
    keep the weights feature-major, (n_weights, k): see :func:`_scores`)."""
    from .dual_cd import LinearFit

    n = y.shape[0]
    y = np.ascontiguousarray(y, dtype=np.int64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    A = row_sqnorms(*ld.args())
    W = np.zeros((n_classes, ld.n_weights))
    alpha = np.zeros((n, n_classes))
    warm = alpha0 is not None and np.shape(alpha0) == (n, n_classes)
    if warm:
        # other classes <= 0, own class = -(sum of the others) <= C_i (rows scaled down where needed)
        rows = np.arange(n)
        a = np.minimum(np.asarray(alpha0, dtype=np.float64), 0.0)
        a[rows, y] = 0.0
        own = -a.sum(axis=1)
        scale = np.where(own > C, C / np.maximum(own, 1e-300), 1.0)
        a *= scale[:, None]
        a[rows, y] = -a.sum(axis=1)
        alpha = a
        from ._linear_common import weighted_sum

        for m in range(n_classes):
            weighted_sum(np.ascontiguousarray(alpha[:, m]), W[m], *ld.args())
    index = np.arange(n, dtype=np.int64)
    istate = np.zeros(1, dtype=np.int64)
    fstate = np.array([INF])
    rng = rng_state(seed)
    args = ld.args()
    ahead, stages, entries = prefetch_plan(ld)
    stages = min(stages, 2)  # no weight stage: every class has weights of its own
    # feature-major for the epochs (see _scores); a cold start's zeros without a copy (100 classes x 50,001
    # weights: a 40 MB copy, 16 ms of a 0.5 s fit)
    Wt = np.ascontiguousarray(W.T) if warm else np.zeros((ld.n_weights, n_classes))

    def step(k):
        rc = _epochs(*args, y, C, A, alpha, Wt, index, istate, fstate, rng, float(tol), int(k), ahead, stages, entries)
        return rc, istate[0]

    def report():
        return _primal(*args, y, C, Wt), fstate[0]

    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="crammer-singer",
    )
    primal = _primal(*args, y, C, Wt)
    W = np.ascontiguousarray(Wt.T)
    dual = float(-0.5 * np.sum(W * W) - (alpha.sum() - alpha[np.arange(n), y].sum()))
    return LinearFit(W, alpha, primal, dual, it, fstate[0], status)
