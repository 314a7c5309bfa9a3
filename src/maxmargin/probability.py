r"""Class probabilities for the SVM classifiers: Platt scaling and pairwise coupling.

Binary problems (Platt 2000, in the form of Lin, Lin & Weng 2007)
-----------------------------------------------------------------
Each one-vs-one problem of classes :math:`a < b` gets a sigmoid

.. math::

    P(a \mid x) \approx \frac{1}{1 + \exp(A\,d(x) + B)}

of its decision value :math:`d` (positive for :math:`a`).  :math:`(A, B)` minimise
the cross-entropy

.. math::

    F(A, B) = \sum_i \big[t_i (A d_i + B) + \log(1 + e^{-(A d_i + B)})\big]

on decision values :math:`d_i` that the model did *not* see: five-fold
cross-validation inside the fit (the folds are a random permutation drawn from
``random_state``, as in LIBSVM; unlike LIBSVM, each fold stops at 30 times the
fit's ``tol``, :func:`fold_tol`).  The targets are Platt's smoothed labels
:math:`t_i = (N_+ + 1)/(N_+ + 2)` for class :math:`a` and :math:`1/(N_- + 2)` for
:math:`b`.  :func:`sigmoid_train` minimises :math:`F` by Newton's method on the
Hessian :math:`H + \sigma I` (:math:`\sigma = 10^{-12}`) with a backtracking line
search (sufficient decrease :math:`F(z + s\,d) < F(z) + 10^{-4} s\,\nabla F^Td`,
halving :math:`s` down to :math:`10^{-10}`), evaluating :math:`\log(1+e^{\pm u})`
in the overflow-free form of Lin, Lin & Weng; it stops when both partial
derivatives are below :math:`10^{-5}` or after 100 iterations.

If a training fold holds one class only, its held-out points get the decision
value +1 (only :math:`a`) or -1 (only :math:`b`), as in LIBSVM.  The classifiers
pose each fold (for the SMO solver) as a problem over *all* rows of its binary
problem with ``index`` = the fold's training rows, so the five folds share one
kernel-row cache (:class:`maxmargin.solvers.smo.KernelRowPool`) and each kernel
row is computed about once instead of five times.

Several classes (Wu, Lin & Weng 2004, method 2)
-----------------------------------------------
With :math:`r_{ab} = P(a \mid a \text{ or } b, x)` from the sigmoids (clipped to
:math:`[10^{-7}, 1 - 10^{-7}]`, :math:`r_{ba} = 1 - r_{ab}`), the class
probabilities solve

.. math::

    \min_p \tfrac12 \sum_a\sum_{b \ne a}(r_{ba}p_a - r_{ab}p_b)^2 = p^TQp
    \quad\text{s.t.}\quad \sum_a p_a = 1,

:math:`Q_{aa} = \sum_{b\ne a} r_{ba}^2`, :math:`Q_{ab} = -r_{ba}r_{ab}`.  For
:math:`r_{ab} > 0` the optimum is unique and non-negative; :func:`pairwise_coupling`
solves its optimality system :math:`\begin{bmatrix}Q & e\\ e^T & 0\end{bmatrix}
\begin{bmatrix}p\\ b\end{bmatrix} = \begin{bmatrix}0\\ 1\end{bmatrix}` for all
points at once (and falls back to the paper's fixed-point iteration where that
system is numerically singular).  For two classes :math:`p = (r_{ab}, r_{ba})`.

When ``predict`` and ``argmax(predict_proba)`` disagree
-------------------------------------------------------
``predict`` uses the decision values (sign, or one-vs-one votes); the
probabilities pass them through the fitted sigmoids first.

* Two classes: with the scikit-learn-oriented decision value :math:`f`
  (positive for ``classes_[1]``), ``predict`` says ``classes_[1]`` iff
  :math:`f > 0`; the probabilities say it iff :math:`P(\text{classes\_[1]}) =
  1/(1 + \exp(A f - B)) > 1/2`, i.e. iff :math:`A f < B` (the pair's decision
  value is :math:`-f`), which is :math:`f > B/A` for the usual :math:`A < 0`.  So
  they disagree exactly on the points whose :math:`f` lies between 0 and
  :math:`B/A` (``probB_[0] / probA_[0]``).  (Should the fit give :math:`A > 0`,
  held-out decision values anti-correlated with the labels, the inequality
  turns: the probabilities say ``classes_[1]`` iff :math:`f < B/A`, and the two
  disagree on every point *outside* that interval.)
* Several classes: additionally, votes count each pair as one whole vote while
  the coupling weighs the pairs' confidences, and vote ties are broken toward
  the class listed first; a point can win most votes yet not the largest
  coupled probability.

``predict_from_proba=True`` on the classifiers makes ``predict`` return
``argmax(predict_proba)`` (ties toward the class listed first), so the two always
agree.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from ._jit import parallel_and_serial
from .kernels import PRECOMPUTED
from .kernels.engine import KernelRows, decide, held_times, kernel_times, postings_per_value
from .kernels.formulas import dot_prefix
from .kernels.rowcache import KernelRowPool, RowCache, gram_data, kernel_data

#: folds of the internal cross-validation (LIBSVM's value)
N_FOLDS = 5
#: pairwise probabilities are clipped into [MIN_PROB, 1 - MIN_PROB]
MIN_PROB = 1e-7
#: the folds stop at this multiple of the fit's ``tol`` (:func:`fold_tol`)
FOLD_TOL_FACTOR = 30.0


def fold_tol(tol):
    """The stopping tolerance of the cross-validation folds for a fit at ``tol``.

    The folds' solutions serve one purpose: held-out decision values for a two-parameter
    sigmoid fit.  A fold stopped at a maximal KKT violation of ``30 * tol`` (against one stopped at
    ``tol``, LIBSVM's choice) moved the probabilities of held-out rows by 3e-6 to 3e-5 on average on
    six shapes of data: a tenth or less of what drawing other folds moves them (``random_state``) on
    four, a quarter on one, and about as much on one where both are under 4e-6; the held-out log
    loss moved by at most 2e-4.  Its folds take a third to a half of the SMO steps, which are most of
    the cost of ``probability=True`` on the binary problems (the many-class route gained less).  At
    ``100 * tol`` the change reached half the draw's and more.  See benchmarks/RESULTS.md (sessions 8
    and 11) for the measurements behind the factor."""
    return FOLD_TOL_FACTOR * float(tol)


@njit(cache=True, nogil=True)
def _log1pexp_terms(dec, A, B, t):
    """Sum over i of t_i u_i + log(1 + exp(-u_i)), u = A dec + B, evaluated without overflow."""
    f = 0.0
    for i in range(dec.shape[0]):
        u = dec[i] * A + B
        if u >= 0:
            f += t[i] * u + np.log1p(np.exp(-u))
        else:
            f += (t[i] - 1.0) * u + np.log1p(np.exp(u))
    return f


@njit(cache=True, nogil=True)
def _sigmoid_train(dec, positive, max_iter, min_step, sigma, eps):
    n = dec.shape[0]
    prior1 = 0.0
    for i in range(n):
        if positive[i]:
            prior1 += 1.0
    prior0 = n - prior1
    hi = (prior1 + 1.0) / (prior1 + 2.0)
    lo = 1.0 / (prior0 + 2.0)
    t = np.empty(n)
    for i in range(n):
        t[i] = hi if positive[i] else lo
    A = 0.0
    B = np.log((prior0 + 1.0) / (prior1 + 1.0))
    fval = _log1pexp_terms(dec, A, B, t)
    for _ in range(max_iter):
        h11 = sigma
        h22 = sigma
        h21 = 0.0
        g1 = 0.0
        g2 = 0.0
        for i in range(n):
            u = dec[i] * A + B
            # p = 1/(1+exp(u)), q = 1 - p, both without overflow
            e = np.exp(-abs(u))
            p = e / (1.0 + e) if u >= 0 else 1.0 / (1.0 + e)
            q = 1.0 - p
            d2 = p * q
            h11 += dec[i] * dec[i] * d2
            h22 += d2
            h21 += dec[i] * d2
            d1 = t[i] - p
            g1 += dec[i] * d1
            g2 += d1
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            nA = A + step * dA
            nB = B + step * dB
            nf = _log1pexp_terms(dec, nA, nB, t)
            if nf < fval + 1e-4 * step * gd:
                A = nA
                B = nB
                fval = nf
                break
            step /= 2.0
        if step < min_step:
            break  # line search failed: keep the last point
    return A, B


def sigmoid_train(dec, labels, max_iter=100, min_step=1e-10, sigma=1e-12, eps=1e-5):
    """Platt's sigmoid ``(A, B)`` for decision values ``dec`` and labels in {+1, -1}
    (+1: the class whose probability ``1/(1 + exp(A dec + B))`` is modelled).

    Newton's method with backtracking line search (Lin, Lin & Weng 2007); see the
    module docstring.  Compiled: a many-class model fits one sigmoid per pair (4950 for
    100 classes), and the NumPy version took about 1.4 ms each.  Returns floats ``(A, B)``.
    """
    dec = np.ascontiguousarray(dec, dtype=np.float64)
    positive = np.ascontiguousarray(np.asarray(labels) > 0)
    A, B = _sigmoid_train(dec, positive, int(max_iter), float(min_step), float(sigma), float(eps))
    return float(A), float(B)


@njit(cache=True, nogil=True)
def _sigmoids(dec, positive, offsets, max_iter, min_step, sigma, eps, A, B):
    for p in range(offsets.shape[0] - 1):
        lo, hi = offsets[p], offsets[p + 1]
        A[p], B[p] = _sigmoid_train(dec[lo:hi], positive[lo:hi], max_iter, min_step, sigma, eps)


def sigmoid_train_many(dec, labels, offsets, max_iter=100, min_step=1e-10, sigma=1e-12, eps=1e-5):
    """:func:`sigmoid_train` for many binary problems at once, laid end to end (problem p's decision
    values and labels at ``offsets[p]:offsets[p + 1]``): arrays ``(A, B)``.  One compiled call; a call
    of :func:`sigmoid_train` per problem costs about 10 us of Python, 0.45 s for the 44,850 pairs of
    300 classes."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    dec = np.ascontiguousarray(dec, dtype=np.float64)
    positive = np.ascontiguousarray(np.asarray(labels) > 0)
    A = np.empty(offsets.shape[0] - 1)
    B = np.empty(offsets.shape[0] - 1)
    _sigmoids(dec, positive, offsets, int(max_iter), float(min_step), float(sigma), float(eps), A, B)
    return A, B


def sigmoid_predict(dec, A, B):
    """``1 / (1 + exp(A dec + B))`` without overflow."""
    u = np.asarray(dec, dtype=np.float64) * A + B
    e = np.exp(-np.abs(u))
    return np.where(u >= 0, e / (1.0 + e), 1.0 / (1.0 + e))


def _coupling_iterative(R, max_iter=None, eps=None):
    """Wu, Lin & Weng's fixed-point iteration for method 2, all points at once."""
    n, k, _ = R.shape
    max_iter = max(100, k) if max_iter is None else max_iter
    eps = 0.005 / k if eps is None else eps
    Rt = np.swapaxes(R, 1, 2)  # Rt[:, a, b] = r_ba
    Q = -Rt * R
    idx = np.arange(k)
    Q[:, idx, idx] = (Rt**2).sum(axis=2) - Rt[:, idx, idx] ** 2
    p = np.full((n, k), 1.0 / k)
    for _ in range(max_iter):
        Qp = np.einsum("nab,nb->na", Q, p)
        pQp = np.einsum("na,na->n", p, Qp)
        if np.max(np.abs(Qp - pQp[:, None])) < eps:
            break
        for a in range(k):
            diff = (-Qp[:, a] + pQp) / Q[:, a, a]
            p[:, a] += diff
            pQp = (pQp + diff * (diff * Q[:, a, a] + 2 * Qp[:, a])) / (1 + diff) ** 2
            Qp = (Qp + diff[:, None] * Q[:, a, :]) / (1 + diff)[:, None]
            p /= (1 + diff)[:, None]
    return p


def pairwise_coupling(R):
    """Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2).

    ``R`` has shape (n, k, k) with ``R[:, a, b] = P(a | a or b)`` for ``a != b``
    (the diagonal is ignored).  Returns (n, k), rows summing to 1.
    """
    R = np.asarray(R, dtype=np.float64)
    n, k, _ = R.shape
    Rt = np.swapaxes(R, 1, 2)
    off = ~np.eye(k, dtype=bool)
    Q = np.where(off, -Rt * R, 0.0)
    idx = np.arange(k)
    Q[:, idx, idx] = np.where(off, Rt**2, 0.0).sum(axis=2)
    M = np.zeros((n, k + 1, k + 1))
    M[:, :k, :k] = Q
    M[:, :k, k] = 1.0
    M[:, k, :k] = 1.0
    rhs = np.zeros((n, k + 1, 1))
    rhs[:, k, 0] = 1.0
    try:
        p = np.linalg.solve(M, rhs)[:, :k, 0]
        bad = ~np.all(np.isfinite(p), axis=1) | np.any(p < -1e-8, axis=1)
    except np.linalg.LinAlgError:
        p = np.full((n, k), np.nan)
        bad = np.ones(n, dtype=bool)
    if bad.any():
        p[bad] = _coupling_iterative(R[bad])
    p = np.clip(p, 0.0, None)
    return p / p.sum(axis=1, keepdims=True)


def _coupled_rows_py(dec, A, B, pa, pb, k, out, bad):
    """Per row of ``dec`` (n, n_pairs): the pairwise probabilities :math:`r_{ab}` (:func:`sigmoid_predict`,
    clipped to [MIN_PROB, 1 - MIN_PROB]) and method 2 of Wu, Lin & Weng as :func:`pairwise_coupling` poses
    it, the (k + 1) x (k + 1) system solved by Gaussian elimination with partial pivoting; ``bad[i]`` where
    a pivot vanished or the solution is not finite or has an entry below -1e-8 (those rows go to the iterative
    method).  ``out`` (n, k)."""
    n, n_pairs = dec.shape
    m = k + 1
    for i in prange(n):
        M = np.zeros((m, m + 1))  # the system and its right-hand side (last column)
        for q in range(n_pairs):
            u = dec[i, q] * A[q] + B[q]
            e = np.exp(-abs(u))
            r = e / (1.0 + e) if u >= 0 else 1.0 / (1.0 + e)
            r = min(max(r, MIN_PROB), 1.0 - MIN_PROB)
            a, b = pa[q], pb[q]
            M[a, b] = -(1.0 - r) * r
            M[b, a] = -r * (1.0 - r)
            M[a, a] += (1.0 - r) * (1.0 - r)
            M[b, b] += r * r
        for a in range(k):
            M[a, k] = 1.0
            M[k, a] = 1.0
        M[k, m] = 1.0
        singular = False
        for c in range(m):
            piv = c
            for t in range(c + 1, m):
                if abs(M[t, c]) > abs(M[piv, c]):
                    piv = t
            if M[piv, c] == 0.0:
                singular = True
                break
            if piv != c:
                for j in range(c, m + 1):
                    M[c, j], M[piv, j] = M[piv, j], M[c, j]
            for t in range(c + 1, m):
                f = M[t, c] / M[c, c]
                if f != 0.0:
                    for j in range(c, m + 1):
                        M[t, j] -= f * M[c, j]
        if singular:
            bad[i] = True
            continue
        x = np.zeros(m)
        for c in range(m - 1, -1, -1):
            v = M[c, m]
            for j in range(c + 1, m):
                v -= M[c, j] * x[j]
            x[c] = v / M[c, c]
        for a in range(k):
            out[i, a] = x[a]
            if not np.isfinite(x[a]) or x[a] < -1e-8:
                bad[i] = True


def _coupled_rows_chol_py(dec, A, B, pa, pb, k, out, bad):
    """:func:`_coupled_rows_py` by the Cholesky factor of ``Q``: with :math:`r_{ab} > 0` (the clipping)
    ``Q`` is positive definite (Wu, Lin & Weng 2004) and the bordered system's solution is
    :math:`p = Q^{-1}e / e^TQ^{-1}e`; the factor costs :math:`k^3/6` multiply-adds against elimination's
    :math:`k^3/3`, in contiguous row products (vector lanes).  ``out`` gets ``p`` normalised; ``bad[i]``
    where a pivot is not positive or ``p`` is not finite or has an entry below -1e-8.  300 classes: 0.37 ms a
    row against 1.6 ms; 50 classes 9.5 against 12 us."""
    n, n_pairs = dec.shape
    for i in prange(n):
        L = np.zeros((k, k))  # Q's lower triangle, then its factor in place
        for q in range(n_pairs):
            u = dec[i, q] * A[q] + B[q]
            e = np.exp(-abs(u))
            r = e / (1.0 + e) if u >= 0 else 1.0 / (1.0 + e)
            r = min(max(r, MIN_PROB), 1.0 - MIN_PROB)
            a, b = pa[q], pb[q]  # a < b
            L[b, a] = -r * (1.0 - r)
            L[a, a] += (1.0 - r) * (1.0 - r)
            L[b, b] += r * r
        ok = True
        for t in range(k):
            Lt = L[t]
            for j in range(t):
                Lt[j] = (Lt[j] - dot_prefix(Lt, L[j], j)) / L[j, j]
            d = Lt[t] - dot_prefix(Lt, Lt, t)
            if not d > 0.0:
                ok = False
                break
            Lt[t] = np.sqrt(d)
        if not ok:
            bad[i] = True
            continue
        z = np.empty(k)  # L z = e
        for t in range(k):
            z[t] = (1.0 - dot_prefix(L[t], z, t)) / L[t, t]
        x = np.empty(k)  # L' x = z
        for t in range(k - 1, -1, -1):
            v = z[t]
            for j in range(t + 1, k):
                v -= L[j, t] * x[j]
            x[t] = v / L[t, t]
        total = 0.0
        for a in range(k):
            total += x[a]
        for a in range(k):
            out[i, a] = x[a] / total
            if not np.isfinite(out[i, a]) or out[i, a] < -1e-8:
                bad[i] = True


_coupled_rows_par, _coupled_rows_ser = parallel_and_serial(_coupled_rows_py)
_coupled_chol_par, _coupled_chol_ser = parallel_and_serial(_coupled_rows_chol_py)

#: rows x pairs from which :func:`probabilities_from_ovo` couples the rows on every core
COUPLING_PARALLEL_MIN = 1 << 16
#: from this many classes the rows are coupled by the Cholesky factor (:func:`_coupled_rows_chol_py`); below it by
#: elimination, which costs less there (10 classes: 0.3 against 0.4 us a row).  ``predict_proba`` on 1,500 rows
#: (session 29), Cholesky / elimination: 16 classes 9.1 / 8.7 ms, 20 12.3 / 12.2, 50 40 / 45, 100 101 / 159;
#: 300 classes, 900 rows, 0.49 / 1.68 s (scikit-learn 1.68 s)
COUPLING_CHOLESKY_MIN = 16


def probabilities_from_ovo(dec, probA, probB):
    """Class probabilities from one-vs-one decision values ``dec`` (n, n_pairs),
    each positive for the first class of its pair (pairs in the order (0,1), (0,2), ...).

    Row by row in compiled code (:func:`_coupled_rows_py`, the system of :func:`pairwise_coupling`): with
    (n, k, k) arrays in NumPy, 50 classes and 3,000 rows took 0.6-0.9 s, most of it temporaries."""
    dec = np.ascontiguousarray(dec, dtype=np.float64)
    n, n_pairs = dec.shape
    k = int(round((1 + np.sqrt(1 + 8 * n_pairs)) / 2))
    A = np.ascontiguousarray(np.broadcast_to(np.asarray(probA, dtype=np.float64), (n_pairs,)))
    B = np.ascontiguousarray(np.broadcast_to(np.asarray(probB, dtype=np.float64), (n_pairs,)))
    if k == 2:
        r = np.clip(sigmoid_predict(dec, A[None, :], B[None, :]), MIN_PROB, 1 - MIN_PROB)
        return np.column_stack([r[:, 0], 1.0 - r[:, 0]])
    p = _couple(dec, A, B, k)
    p = np.clip(p, 0.0, None)
    return p / p.sum(axis=1, keepdims=True)


def pairwise_matrix(dec, A, B, k):
    """``R`` (n, k, k) of :func:`pairwise_coupling` from one-vs-one decision values and the pairs' sigmoids:
    ``R[:, a, b]`` = :math:`r_{ab}` for a != b, 0.5 on the diagonal."""
    from .svm import pair_classes  # (kept per class count; svm imports this module)

    pa, pb = pair_classes(k)
    r = np.clip(sigmoid_predict(dec, A[None, :], B[None, :]), MIN_PROB, 1 - MIN_PROB)
    R = np.full((r.shape[0], k, k), 0.5)
    R[:, pa, pb] = r
    R[:, pb, pa] = 1.0 - r
    return R


def _couple(dec, A, B, k):
    """Unnormalised class probabilities of each row (:func:`_coupled_rows_py`; its bad rows by the iteration)."""
    n, n_pairs = dec.shape
    from .svm import pair_classes  # (kept per class count; svm imports this module)

    pa, pb = pair_classes(k)
    p = np.empty((n, k))
    bad = np.zeros(n, dtype=np.bool_)
    par = n * n_pairs >= COUPLING_PARALLEL_MIN
    if k >= COUPLING_CHOLESKY_MIN:
        fn = _coupled_chol_par if par else _coupled_chol_ser
    else:
        fn = _coupled_rows_par if par else _coupled_rows_ser
    fn(dec, A, B, pa.astype(np.int64), pb.astype(np.int64), k, p, bad)
    if bad.any():
        p[bad] = _coupling_iterative(pairwise_matrix(dec[bad], A, B, k))
    return p


# ------------------------------------------------------------------ cross-validation
def _rows(X, idx):
    return X[idx]


def held_out_decision(X, kernel, train, test, fit, ytrain, parallel=True, held=None):
    """Decision values of a binary fit on rows ``train`` at the rows ``test`` of ``X``
    (for a precomputed kernel ``X`` is the pair's Gram matrix); ``parallel=False`` on a fold's
    own worker thread (:func:`maxmargin.kernels.engine.kernel_times`); ``held``: a :class:`HeldRows`
    whose rows serve the support vectors it holds."""
    if fit.alpha is None:  # primal solver, linear kernel
        return np.asarray(X[test] @ fit.w).ravel() - fit.rho
    sv = np.flatnonzero(fit.alpha > 0)
    if sv.size == 0:
        return np.full(test.shape[0], -fit.rho)
    coef = fit.alpha[sv] * ytrain[sv]
    cols = train[sv]
    if kernel.code == PRECOMPUTED and kernel.name != "callable":
        K = X[test][:, cols]
        K = K.toarray() if sp.issparse(K) else np.asarray(K)
        return K @ coef - fit.rho
    if held is not None:
        return held.times(X, kernel, cols, coef, test, parallel) - fit.rho
    return kernel_times(kernel, X[test], X[cols], coef, parallel=parallel) - fit.rho


def restore_equality(alpha, y):
    r"""``alpha`` (within its box) with :math:`y^T\alpha = 0` restored by changing as few multipliers as
    possible: the excess :math:`r = y^T\alpha` is taken from the side that has it, largest multipliers
    first (a copy; that side always holds at least :math:`|r|`).  A fold's warm start: the held-out rows
    leave :math:`r = y_{test}^T\alpha_{test}`, a few multipliers' worth.  Spreading it over the whole
    side instead (:func:`maxmargin.solvers.smo.initial_alpha`'s rule, in proportion) moves every support
    vector at its bound off it, and SMO then spends steps putting them back (sparse40k, 8,000 rows: 2,700
    SMO steps a fold instead of 4,800)."""
    a = np.array(alpha, dtype=np.float64)
    r = float(y @ a)
    if r == 0.0:
        return a
    cand = np.flatnonzero((y == np.sign(r)) & (a > 0))
    cand = cand[np.argsort(-a[cand], kind="stable")]
    before = np.r_[0.0, np.cumsum(a[cand])[:-1]]
    a[cand] -= np.clip(abs(r) - before, 0.0, a[cand])
    return a


def fold_start(X, kernel, y, alpha, grad, train, parallel=True, held=None):
    r"""A warm start for a fold of the 1-norm C-SVC dual (:math:`p = -1`, no shift) and its gradient,
    from the full fit's multipliers ``alpha`` and gradient ``grad`` (all rows of the problem).

    The fold keeps the rows ``train``; without the held-out ones :math:`y^T\alpha` is off by
    :math:`r = y_{test}^T\alpha_{test}`, which is taken from as few multipliers as possible
    (:func:`restore_equality`).  Then
    :math:`G^{fold}_t = G_t - y_t\sum_{j\in test}K_{tj}\,y_j\alpha_j + y_t\sum_{j\in changed}K_{tj}\,y_j\Delta\alpha_j`:
    the held-out support vectors and a few changed multipliers, about a quarter of the kernel values of a
    gradient from the fold's own support vectors (``held``, a :class:`HeldRows`: read from its rows where
    it holds them).  Returns ``(alpha0, grad0)`` over ``train``."""
    n = y.shape[0]
    test = np.ones(n, dtype=bool)
    test[train] = False
    yt = y[train]
    a = restore_equality(alpha[train], yt)
    changed = np.flatnonzero(a != alpha[train])
    out_sv = np.flatnonzero(test & (alpha > 0))
    rows = np.concatenate([out_sv, train[changed]])
    coef = np.concatenate([-alpha[out_sv] * y[out_sv], (a[changed] - alpha[train][changed]) * yt[changed]])
    g = np.array(grad[train], dtype=np.float64)
    if rows.size and held is not None:
        g += yt * held.times(X, kernel, rows, coef, train, parallel)
    elif rows.size:
        g += yt * kernel_times(kernel, _rows(X, train), _rows(X, rows), coef, parallel=parallel)
    return a, g


def fold_workers():
    """Threads for the folds: the cores this process may use, at most Numba's thread
    count (``numba.set_num_threads`` limits it) and the number of folds."""
    import numba

    from ._threads import cores

    return max(1, min(cores(), numba.get_num_threads(), N_FOLDS))


def fold_plan(n, rng, n_folds=N_FOLDS):
    """LIBSVM's folds: a random permutation of ``range(n)`` (:func:`fold_permutations`, from ``rng``) cut
    into ``n_folds`` consecutive parts; returns ``[(train, test), ...]`` (train sorted)."""
    return plan_of(fold_permutations([n], rng)[0], n_folds)


@njit(cache=True, nogil=True)
def _sort_segments(keys, offsets, out):
    for p in range(offsets.shape[0] - 1):
        lo, hi = offsets[p], offsets[p + 1]
        out[lo:hi] = np.argsort(keys[lo:hi], kind="mergesort")


def fold_permutations(sizes, rng):
    """One random permutation of ``range(n)`` for each ``n`` in ``sizes``, all from one draw of ``rng``
    (a ``numpy.random.RandomState``): each orders its segment of uniform keys.  Drawn this way for
    many classes' tens of thousands of pairs, where a ``rng.permutation`` call per pair was 0.2 s
    (300 classes)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    keys = rng.random_sample(int(offsets[-1]))
    flat = np.empty(int(offsets[-1]), dtype=np.int64)
    _sort_segments(keys, offsets, flat)
    return [flat[offsets[p] : offsets[p + 1]] for p in range(sizes.shape[0])]


def plan_of(perm, n_folds=N_FOLDS):
    """The folds ``[(train, test), ...]`` of the permutation ``perm``: test ``f`` is its ``f``-th of
    ``n_folds`` consecutive parts, train the other rows in increasing order."""
    n = perm.shape[0]
    out = []
    for f in range(n_folds):
        test = perm[f * n // n_folds : (f + 1) * n // n_folds]
        keep = np.ones(n, dtype=bool)
        keep[test] = False
        out.append((np.flatnonzero(keep), test))
    return out


def class_groups(y):
    """The rows of a binary problem (labels ``y``, +1 / -1) with every +1 first, each class in its own order
    (as LIBSVM groups the training rows by class); None where they already come so.

    The folds are solved on the rows in this order (:func:`grouped`): a fold's training rows in
    increasing order are then one class after the other, and SMO's loops, which branch on each variable's
    class, no longer mispredict half of those branches on a balanced problem (the selection over 16,000
    variables of easy20k: 245 us in the data's order, 59 us grouped).  Ordering the variables by class
    without moving the rows was slower on ijcnn1 (1.2x): the kernel rows were then read in two sweeps."""
    pos = y > 0
    k = int(np.count_nonzero(pos))
    if pos[:k].all():
        return None
    return np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])


def grouped(perm, X, y, bounds, fit, plan):
    """A binary problem's rows, labels, bounds, full fit and fold plan in the row order ``perm``
    (:func:`class_groups`): row ``perm[r]`` becomes row ``r``; each fold's rows stay in increasing order."""
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.shape[0])
    extra = dict(fit.extra)
    if isinstance(extra.get("train_decision"), np.ndarray) and extra["train_decision"].shape == y.shape:
        extra["train_decision"] = extra["train_decision"][perm]
    fit = dataclasses.replace(
        fit,
        alpha=None if fit.alpha is None else fit.alpha[perm],
        coef=None if fit.coef is None else fit.coef[perm],
        extra=extra,
    )
    plan = [(np.sort(inv[train]), inv[test]) for train, test in plan]
    return X[perm], y[perm], bounds[perm], fit, plan


def cv_decision_values(
    fit_fold,
    X,
    y,
    kernel,
    rng,
    alpha_full=None,
    n_folds=N_FOLDS,
    full_fit=None,
    workers=1,
    on_fold=None,
    plan=None,
    held=None,
):
    """Held-out decision values of a binary problem by ``n_folds``-fold cross-validation.

    ``fit_fold(train_rows, alpha0)`` fits the binary problem on the given rows
    (``alpha0``: a starting point or None) and returns a ``BinaryFit``;
    ``rng`` is a ``numpy.random.RandomState`` (the permutation of the rows);
    ``alpha_full`` the multipliers of the fit on all rows, used as warm start.
    If a fold's fit raises ValueError (a degenerate fold, e.g. an infeasible nu on
    its rows) and ``full_fit`` (the fit on all rows) is given, that fold's points
    get the full fit's decision values instead.

    With ``workers > 1`` the folds run on that many threads (``fit_fold`` must then be
    thread-safe); each fold's values go to its own test rows, so the result does not
    depend on ``workers`` or on the order in which the folds finish.
    ``on_fold()`` is called after each fold (progress).  ``plan`` (from :func:`fold_plan` or :func:`plan_of`)
    replaces the folds drawn from ``rng``.  ``held``: a :class:`HeldRows` for the held-out values.
    """
    n = y.shape[0]
    if plan is None:
        plan = fold_plan(n, rng, n_folds)
    dec = np.zeros(n)

    threaded = workers > 1 and sum(1 for _, test in plan if test.size) > 1

    def one(train, test):
        ytr = y[train]
        n_pos = int(np.sum(ytr > 0))
        if n_pos == 0 or n_pos == ytr.shape[0]:
            return 0.0 if ytr.shape[0] == 0 else (1.0 if n_pos else -1.0)
        alpha0 = None if alpha_full is None else alpha_full[train]
        try:
            fit = fit_fold(train, alpha0)
        except ValueError:
            if full_fit is None:
                raise
            return held_out_decision(X, kernel, np.arange(n), test, full_fit, y, parallel=not threaded)
        return held_out_decision(X, kernel, train, test, fit, ytr, parallel=not threaded, held=held)

    todo = [(train, test) for train, test in plan if test.size]
    if workers > 1 and len(todo) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            futures = [pool.submit(one, train, test) for train, test in todo]
            for (_, test), f in zip(todo, futures):
                dec[test] = f.result()
                if on_fold is not None:
                    on_fold()
    else:
        for train, test in todo:
            dec[test] = one(train, test)
            if on_fold is not None:
                on_fold()
    return dec


#: at most this fraction of the folds' shared array holds the full fit's support vectors' rows; the rest is
#: cut into the workers' regions (:class:`FoldRows`)
SHARED_MAX_FRACTION = 0.75
#: MB of kernel rows at a time when :meth:`FoldRows.starts` adds the part of the support vectors not shared
START_BLOCK_MB = 32


def _slots(n, cache_size, workers):
    """Rows of ``n`` values in the folds' array of ``cache_size`` MB (at most ``n`` plus two per worker)."""
    slots = min(int(cache_size * 1024 * 1024 // (8 * max(n, 1))), n + 2 * workers)
    return max(2 * workers, slots)


def shared_slots(n, cache_size, workers):
    """How many of the full fit's support vectors' rows :class:`FoldRows` shares: the workers' regions keep
    at least a share of the slots (:data:`SHARED_MAX_FRACTION`) -- with every slot but two per worker given to
    the support vectors, a fold recomputed each new row it needed again and again (ijcnn1, 20,000 rows in
    200 MB: 3,000 rows a fold for 4,500 steps)."""
    slots = _slots(n, cache_size, workers)
    return max(min(slots - 2 * workers, int(SHARED_MAX_FRACTION * slots)), 0)


#: :class:`HeldRows` serves the batched folds of dense data from this many features ...
HELD_MIN_FEATURES = 256
#: ... and of wide sparse data (the engine's "wide" path) whose kernel value meets this many of the columns'
#: stored values on average (the sum of a row's features' document frequencies over the rows)
HELD_MIN_POSTINGS = 4.0


def rows_are_dear(X, kernel):
    """Whether a kernel row of ``X`` costs enough more than reading one that :class:`HeldRows` pays for its
    rows: dense rows of at least :data:`HELD_MIN_FEATURES` features, or wide sparse rows of at least
    :data:`HELD_MIN_POSTINGS` postings a kernel value.  Measured (session 14, probability fits of dense binary
    data, 6,000 rows, with / without): 64 features 0.98, 128 0.99, 256 0.89, 512 0.71, 2,000 0.57 (dense2k);
    dense100k's 100 features at 10,000 rows 1.05; text2 (12 postings a value) 0.87-0.92, hashed300k (0.0004)
    1.05."""
    if getattr(kernel, "code", None) == PRECOMPUTED:
        return False
    path = decide(X, kernel)
    if path == "dense":
        return X.shape[1] >= HELD_MIN_FEATURES
    if path != "wide":
        return False
    X = sp.csr_matrix(X)
    return postings_per_value(X.indices, X.shape[1], X.shape[0]) >= HELD_MIN_POSTINGS


class HeldRows:
    """The full fit's support vectors' kernel rows (over all rows of the problem), for the batched folds.

    Where a kernel row is dear (:func:`rows_are_dear`: a 5,000 x 2,000 dense problem's folds spent 3.8 s of 9.9 s
    on their rows and 4 s on kernel products), the rows of the full fit's support vectors (free ones first) are
    computed once, in as much of ``cache_size`` as leaves a fold's working set its rows
    (:meth:`fold_cache_size`); every fold then reads them: its warm start (:func:`fold_start`), the kernel rows of
    its working sets (the batched solver's ``shared_rows``) and its held-out decision values
    (:func:`held_out_decision`).  The rows hold the same values whichever fold reads them, and every sum over
    them runs in a fixed order (:func:`maxmargin.kernels.engine.held_times`), so the folds' results do not
    depend on the threads.
    """

    def __init__(self, X, kernel, alpha, upper, cache_size, fold_rows):
        n = X.shape[0]
        budget = int(cache_size * 1024 * 1024 // (8 * max(n, 1)))
        q = min(1024, max(fold_rows, 1))  # a fold's working set (batched.working_set_size) keeps its rows
        free = np.flatnonzero((alpha > 0) & (alpha < upper))
        bound = np.flatnonzero((alpha > 0) & (alpha >= upper))
        room = max(0, budget - int(np.ceil(q * max(fold_rows, 1) / max(n, 1))))
        self.sv = np.r_[free, bound][:room].astype(np.int64)
        self.slot = np.full(n, -1, dtype=np.int64)
        self.slot[self.sv] = np.arange(self.sv.shape[0])
        self.rows = np.empty((self.sv.shape[0], n))
        self.mb = self.rows.nbytes / (1024 * 1024)
        self.cache_size = float(cache_size)
        if self.sv.size:
            KernelRows(X, kernel).compute(self.sv, self.rows)

    def fold_cache_size(self):
        """The ``cache_size`` left to a fold beside the held rows."""
        return max(self.cache_size - self.mb, 0.0)

    def times(self, X, kernel, rows, coef, targets, parallel=True):
        r""":math:`\sum_r c_r K(x_{rows_r}, x_t)` for the rows ``targets`` of ``X``: the held rows read, the others
        computed (:func:`maxmargin.kernels.engine.kernel_times`)."""
        return _held_or_computed(self.rows, self.slot, X, kernel, rows, coef, targets, parallel)


def _held_or_computed(S, slot, X, kernel, rows, coef, targets, parallel):
    """:meth:`HeldRows.times` over the rows ``S`` (``slot[i]``: the row of data row i in ``S``, -1: not held)."""
    slots = slot[rows]
    have = slots >= 0
    out = held_times(S, slots[have], coef[have], targets, parallel)
    if not have.all():
        out += kernel_times(kernel, _rows(X, targets), _rows(X, rows[~have]), coef[~have], parallel=parallel)
    return out


class FoldRows:
    """Kernel rows the cross-validation folds of one binary problem share.

    The folds are posed over all rows of the problem (``index`` = a fold's training
    rows), so a kernel row :math:`K(x_i, \\cdot)` serves every fold.  The rows of the
    full fit's support vectors (free ones first, in at most :data:`SHARED_MAX_FRACTION` of
    ``cache_size`` MB) are computed once, in blocks (:class:`maxmargin.kernels.engine.KernelRows`), into one
    array of ``cache_size`` MB; the rest of it is cut into ``workers`` regions.  A fold
    runs on a cache over that array (:meth:`maxmargin.kernels.rowcache.RowCache.sharing`):
    the shared rows read only, new rows into a free region, which it holds until it ends
    (:meth:`pool`).  Nothing is copied per fold, and the folds together stay within
    ``cache_size``.  A fold's iterates do not depend on which rows its cache holds, and
    its starting gradient (:meth:`starts`) is computed from the shared rows alone, so
    each fold's result is the same whatever the threads.
    """

    def __init__(self, X, kernel, alpha, upper, cache_size, workers=1):
        import queue

        self.kd = kernel_data(X, kernel)
        # the folds' pools serve this one problem (FoldPool.key_of): a token, not a fingerprint of the data
        # (hashing X took 3 ms of easy20k's 90 ms probability fit, 0.15 s for 160 MB)
        self.key = None if getattr(kernel, "name", "") == "callable" else ("fold rows", id(self))
        self.cache_size = cache_size
        self.n = n = X.shape[0]
        workers = max(1, int(workers))
        slots = _slots(n, cache_size, workers) if self.key is not None else 0
        free = np.flatnonzero((alpha > 0) & (alpha < upper))
        bound = np.flatnonzero((alpha > 0) & (alpha >= upper))
        room = shared_slots(n, cache_size, workers) if self.key is not None else 0
        self.sv = np.r_[free, bound][:room].astype(np.int64)
        self._rest = np.r_[free, bound][room:].astype(np.int64)  # support vectors whose rows are not shared
        self._X, self._kernel = X, kernel
        k = self.sv.shape[0]
        self.slot = np.full(n, -1, dtype=np.int64)  # the shared row of each data row (-1: none)
        self.slot[self.sv] = np.arange(k)
        self.rows = np.empty((slots, n))
        cuts = np.linspace(k, slots, workers + 1).astype(np.int64)
        self.regions = queue.SimpleQueue()
        for r in range(workers):
            self.regions.put(range(int(cuts[r]), int(cuts[r + 1])))
        if k:  # in blocks of rows (BLAS products, on every thread where the folds will run on threads)
            KernelRows(X, kernel).compute(self.sv, self.rows, parallel=workers > 1)

    def starts(self, plan, alpha, y, upper):
        r"""Each fold's warm start and SMO gradients, from the shared rows in one product: for the fold
        ``(train, test)`` of ``plan``, :math:`\alpha^0` = the full fit's multipliers on ``train`` with
        :math:`y^T\alpha = 0` restored (:func:`restore_equality`), :math:`G = Q\alpha^0 - 1` and
        :math:`\bar G = \sum_{\alpha^0_j = U_j}U_jQ_{\cdot j}` over ``train`` (the 1-norm C-SVC dual's
        :func:`maxmargin.solvers.smo.init_gradient`).  Returns ``[(alpha0, G, Gbar), ...]`` in the order
        of ``plan``.  The support vectors whose rows are not shared add their part by kernel blocks
        (:data:`START_BLOCK_MB` at a time), computed once for all folds."""
        k = self.sv.shape[0]

        def products(coef):
            s = self.rows[:k].T @ coef[:k] if k else np.zeros((self.n, coef.shape[1]))
            if self._rest.size:
                step = max(1, int(START_BLOCK_MB * 1024 * 1024 // (8 * max(self.n, 1))))
                block = np.empty((min(step, self._rest.size), self.n))
                rows = KernelRows(self._X, self._kernel)
                for lo in range(0, self._rest.size, step):
                    part = self._rest[lo : lo + step]
                    rows.compute(part, block)
                    s += block[: part.size].T @ coef[k + lo : k + lo + part.size]
            return s

        return fold_starts(plan, alpha, y, upper, np.r_[self.sv, self._rest], products)

    def times(self, X, kernel, rows, coef, targets, parallel=True):
        r""":math:`\sum_r c_r K(x_{rows_r}, x_t)` for the rows ``targets`` of ``X`` (as :meth:`HeldRows.times`):
        a fold's held-out decision values read the shared rows (read only while the folds run) instead of
        computing kernel products."""
        return _held_or_computed(self.rows, self.slot, X, kernel, rows, coef, targets, parallel)

    @contextlib.contextmanager
    def pool(self):
        """A :class:`maxmargin.kernels.rowcache.KernelRowPool` for one fold (while in the block): a cache
        over the shared rows with a region of its own (a free one; waits for one otherwise)."""
        pool = FoldPool(float("inf"), self.key)
        if self.key is None:
            yield pool
            return
        region = self.regions.get()
        try:
            cache = RowCache.sharing(self.rows, self.sv, region)
            # scratch of the sparse rows: one per fold
            kd = self.kd._replace(work=np.zeros_like(self.kd.work), acc=np.zeros_like(self.kd.acc))
            pool.entries[self.key] = [kd, cache, pool.generation]
            yield pool
        finally:
            self.regions.put(region)


def fold_starts(plan, alpha, y, upper, sv, products):
    r"""Each fold's warm start and SMO gradients (:meth:`FoldRows.starts`), for every fold at once: the
    coefficients of the folds' starts over the data rows ``sv`` (every row a start's multiplier is nonzero on)
    go to ``products(coef)``, which returns :math:`\sum_{r} K(x_t, x_{sv_r})\,coef_{r, c}` for every data
    row ``t`` and column ``c`` (two columns a fold: its :math:`Q\alpha^0` and :math:`\bar G` parts).
    None if a start leaves ``sv``."""
    n = y.shape[0]
    held = np.full(n, -1, dtype=np.int64)
    held[sv] = np.arange(sv.shape[0])
    coef = np.zeros((sv.shape[0], 2 * len(plan)))
    alphas = []
    for f, (train, _) in enumerate(plan):
        yt = y[train]
        a = restore_equality(alpha[train], yt)
        nz = np.flatnonzero(a > 0)
        at_up = nz[a[nz] >= upper[train][nz]]
        slots = held[train[nz]]
        if np.any(slots < 0):  # pragma: no cover - restore_equality only lowers multipliers
            return None
        coef[slots, 2 * f] = yt[nz] * a[nz]
        coef[held[train[at_up]], 2 * f + 1] = yt[at_up] * upper[train][at_up]
        alphas.append(a)
    s = products(coef)
    out = []
    for f, (train, _) in enumerate(plan):
        yt = y[train]
        out.append((alphas[f], yt * s[train, 2 * f] - 1.0, yt * s[train, 2 * f + 1]))
    return out


class WholeGram:
    """The whole kernel matrix ``G`` of one binary problem's rows (SMO computed it for the full fit,
    :func:`maxmargin.kernels.rowcache.whole_gram_cache`), shared by its cross-validation folds: each fold's SMO
    reads it as a pinned row cache (nothing computed, nothing copied; its start gradient from the matrix's
    rows too) and its held-out values are products with it (:meth:`times`).  Read only while the folds run."""

    def __init__(self, G):
        self.G = G
        self.kd = gram_data(G)
        self.key = object()

    @contextlib.contextmanager
    def pool(self):
        """A pool for one fold (as :meth:`FoldRows.pool`) whose cache holds every row of ``G``."""
        pool = FoldPool(float("inf"), self.key)
        cache = RowCache.sharing(self.G, np.arange(self.G.shape[0], dtype=np.int64), range(0))
        pool.entries[self.key] = [self.kd, cache, pool.generation]
        yield pool

    def starts(self, plan, alpha, y, upper):
        """Each fold's warm start and SMO gradients (as :meth:`FoldRows.starts`) in one product with the support
        vectors' rows of ``G`` (before: each fold's SMO read all of ``G`` for its start, 14 ms of a 20 ms fold
        of 2,400 rows)."""
        sv = np.flatnonzero(alpha > 0)
        return fold_starts(plan, alpha, y, upper, sv, lambda coef: self.G[sv].T @ coef)

    def times(self, X, kernel, rows, coef, targets, parallel=True):
        r""":math:`\sum_r c_r K(x_{rows_r}, x_t)` for the rows ``targets``, read from ``G``."""
        return self.G[np.ix_(targets, rows)] @ coef


class FoldPool(KernelRowPool):
    """A pool serving one fold of one pair: the fold's problem is over the pair's rows, whose cache
    :class:`FoldRows` holds under its own token (no hashing of the data)."""

    def __init__(self, budget_mb, key):
        super().__init__(budget_mb)
        self.key = key

    def key_of(self, problem, cache_size):
        return self.key
