r"""Crammer-Singer where the dual epochs stall: an interior point on the whole dual.

The coordinate-descent epochs of :mod:`~maxmargin.solvers.crammer_singer` crawl on unscaled columns (the wine
data, columns of 0.1 to 1,700: after 1,000 epochs a primal objective of 65.5 against an optimum near 19; LIBLINEAR
runs up to 100,000 epochs there and stops at 19.07), as the one-vs-rest hinge loss does (:mod:`.dual_ipm`).  As
there, a :class:`~maxmargin.solvers.dual_primal.StallWatch` follows the epochs, and where they will not meet ``tol``
(or, on rows in cache, where the interior point is cheaper than the epochs still to run) the dual is solved by a
primal-dual interior point.

The dual in the variables of the other classes
----------------------------------------------
With :math:`\alpha_i^m \le C_i^m` and :math:`\sum_m \alpha_i^m = 0` (:mod:`.crammer_singer`), the own class's
value is the negated sum of the others, and the others are at most 0.  Put :math:`\beta_i^m = -\alpha_i^m \ge 0`
for the :math:`k - 1` classes :math:`m \ne y_i`; then :math:`\alpha_i^{y_i} = \sum_m \beta_i^m \le C_i`, and the
dual is

.. math:: \min_{\beta \ge 0}\ \tfrac12 \sum_m \|w_m\|^2 - \sum_{i,m} \beta_i^m
          \quad\text{s.t.}\quad \sum_m \beta_i^m \le C_i, \qquad w_m = \sum_i \alpha_i^m v_i = V^T\alpha^m,

with :math:`v_i` the row with its bias value.  Inequalities only: :math:`n(k-1)` bounds and :math:`n` sums.  The
gradient is :math:`g_i^m = w_{y_i}\cdot v_i - w_m\cdot v_i - 1` (the margins of the primal's max).

The Newton system
-----------------
Of the predictor-corrector steps (Mehrotra's, as :func:`~maxmargin.solvers.ipm.interior_point`), with multipliers
:math:`z` of the bounds and :math:`\zeta_i` of the sums (slack :math:`s_i = C_i - \sum_m\beta_i^m`), is
:math:`(H + B)\,d\beta = r`: the Hessian :math:`H = UU^T` of rank :math:`kr` (:math:`U_i^T = P_i \otimes v_i`,
:math:`P_i` the map :math:`\beta_i \mapsto \alpha_i`) and :math:`B` block-diagonal, one block a sample:
:math:`B_i = \mathrm{diag}(z_i/\beta_i) + (\zeta_i/s_i)\,\mathbf{1}\mathbf{1}^T`, inverted by Sherman-Morrison.
By Woodbury, :math:`(H+B)^{-1} = B^{-1} - B^{-1}U M^{-1} U^T B^{-1}` with the :math:`kr \times kr` matrix

.. math:: M = I + \sum_i T_i \otimes v_i v_i^T, \qquad T_i = P_i B_i^{-1} P_i^T \ (k \times k),

built by one symmetric rank-n update and one product a class (:func:`_newton_matrix`, :math:`n k^2 r^2` flops), then
factored once a step.  A step costs no more than a few epochs on few columns (wine: 178 rows, 3 classes,
:math:`kr = 42`); on letter26 (15,000 rows, 26 classes, :math:`kr = 442`) ~0.15 s.  Up to :math:`kr = 128`
(:data:`COMPILED_MAX_ORDER`) a compiled copy of the same steps runs (:func:`_cs_ipm`): the NumPy version's ~250
calls a step cost ~0.4 ms, more than the arithmetic of the small problems.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
from numba import njit

from . import crammer_singer, ipm
from .dual_cd import LinearFit
from .dual_ipm import (
    ACCEPT,
    CONVERGED,
    ESTIMATED_STEPS,
    EXTENDED_NEWTON,
    FLOP_RATE,
    GAP_TOL,
    NO_PROGRESS,
    STALL_FROM,
    STALLED,
    STEP_SECONDS_COMPILED,
    _cho_solve,
    _cholesky,
    _finish,
    _longest_step,
    compiled_rules,
    scales_to_try,
    signed_rows,
    step_rule,
)
from .dual_primal import DUAL_EPOCHS, StallWatch, look_every

#: the interior point is offered only where :math:`n k r` (the rows of its rank-n update, :func:`_newton_matrix`) is
#: at most MAX_VALUES and :math:`kr` (``M``'s order) at most MAX_ORDER
MAX_VALUES = 1 << 24
MAX_ORDER = 2048
#: the cost model of the switch (:func:`_watch`): NumPy's fixed cost a Newton step (~250 calls; 200 x 21 rows, 2
#: classes: 14 steps in 6.3 ms), and an epoch's time: a row, a row and class (the sample's sub-problem), a stored
#: value and class, dense (class-major vector lanes) or CSR.  Session 40, epochs with shrinking, us measured /
#: modelled: wine (178 x 13, 3 classes) 21 / 9, 200 x 20 (2) 12 / 8, digits (1,400 x 64, 10) 95 / 230, emb128
#: (8,000 x 128, 10) 906 / 1,800, letter26 (15,000 x 16, 26) 3,900 / 4,000; as CSR, ns a value and class 0.4-1.0.
#: Where it errs it errs high on the larger data, so the epochs rather than the interior point keep doubtful cases.
STEP_SECONDS = 4e-4
ROW_SECONDS = 2e-8
ROW_CLASS_SECONDS = 8e-9
VALUE_CLASS_SECONDS = 1e-10
VALUE_CLASS_SECONDS_CSR = 4e-10
#: the switch (:func:`_watch`): where the relative duality gap at a look of the watch is above FAR, priced against
#: EXTEND times the epochs left of ``max_iter`` (epochs that end far from the optimum are worth less than their
#: time: wine, unscaled, after 1,000 epochs (3 ms) 65-80 against 9.32 and training accuracy 0.74-0.89 against 0.99;
#: the interior point ~20 ms)
FAR = 0.5
EXTEND = 4
#: the interior point's result is the fit where its relative duality gap is within this (or ``tol``, where smaller):
#: looser than :data:`~.dual_ipm.GAP_ACCEPT`, as its Woodbury solves lose digits late in the run (unscaled wine:
#: 1.05e-5, and the epochs from there stall); the epochs' own results at LIBLINEAR's tol 0.1 are at 1e-4 to 5e-3
GAP_ACCEPT = 1e-4
#: rounds of iterative refinement of each Newton solve (see :func:`cs_qp`), once the best gap plus residual is
#: below REFINE_FROM (earlier the solves are exact enough, and each round is ~10 NumPy calls)
REFINE = 2
REFINE_FROM = 1e-2
#: the compiled interior point (:func:`_cs_ipm`) for :math:`kr` at most COMPILED_MAX_ORDER and :math:`n (kr)^2` at
#: most COMPILED_MAX.  Session 41, whole interior points, ms NumPy -> compiled (the same steps): 200 x 21 rows, 2
#: classes 5.8 -> 1.0; wine (178 x 14, 3) 14.1 -> 2.2; breast cancer (569 x 31, 2) 25 -> 8.3; 12,000 x 32, 4 classes
#: 1,671 -> 302; 20,000 x 64, 2: 2,053 -> 743; 8,000 x 16, 8: 2,375 -> 464.  From kr = 256 the two are even (4,000
#: x 32, 8 classes: 1,190 / 1,207 ms; 3,000 x 17, 26: 1,074 / 1,170): its blocks are k(k+1)/2 small products
COMPILED = True
COMPILED_MAX_ORDER = 128
COMPILED_MAX = 1 << 29


def _others(y, k):
    """(n, k - 1): each sample's classes other than its own, in order."""
    j = np.arange(k - 1)[None, :]
    return j + (j >= y[:, None])


def _alpha(beta, y, others, k):
    """:math:`\\alpha` (n, k) of :math:`\\beta` (n, k - 1): minus beta at the other classes, their sum at the own."""
    n = beta.shape[0]
    A = np.zeros((n, k))
    rows = np.arange(n)[:, None]
    A[rows, others] = -beta
    A[np.arange(n), y] = beta.sum(axis=1)
    return A


def _margins(S, y, others):
    """:math:`S_{i,y_i} - S_{i,m}` for the other classes (n, k - 1) of scores ``S`` (n, k)."""
    n = S.shape[0]
    return S[np.arange(n), y][:, None] - S[np.arange(n)[:, None], others]


def _apply_binv(r, u, gamma):
    """:math:`B_i^{-1} r_i` for every sample: :math:`B_i^{-1} = \\mathrm{diag}(u) - \\gamma u u^T`."""
    t = r * u
    return t - (gamma * t.sum(axis=1))[:, None] * u


def cs_qp(V, y, k, C, p=-1.0, max_newton=EXTENDED_NEWTON, soft_limit=ipm.MAX_NEWTON):
    r"""The interior point for the dual of the module docstring with rows ``V`` (n, r; the bias column included),
    class indices ``y``, per-sample ``C`` > 0 and the linear coefficient ``p`` of every :math:`\beta` (-1; the
    scaled problem passes -1 / scale).  Returns ``(beta (n, k - 1) or None, steps)``: None where it failed (a
    factor not positive definite, values not finite, or the Newton steps used up with gap plus residual above
    :data:`~.dual_ipm.ACCEPT`)."""
    n, r = V.shape
    others = _others(y, k)
    beta = (C / (2.0 * k))[:, None] * np.ones((1, k - 1))
    # (multipliers started at the first gradient, z = g + zeta, made the small problems' results 2-10x more exact
    # but letter26's steps far shorter: 60 steps, gap still 1.8e3 against 3e-2; started at 1 here)
    z = np.ones((n, k - 1))
    zeta = np.ones(n)
    s = C - beta.sum(axis=1)  # the sums' slacks, a variable of their own (C - sum beta loses digits near 0)
    n_con = n * k
    top = float(np.einsum("ij,ij->i", V, V).max()) if n else 0.0
    reg = ipm.REG * max(top, 1.0)
    best = (np.inf, beta.copy(), 0)
    gaps = [np.inf]
    groups = [np.flatnonzero(y == c) for c in range(k)]

    def solve(rhs, u, gamma, factor):
        # Woodbury's solve, then REFINE rounds of iterative refinement against (H + B) applied exactly: late in the
        # run B's values span many orders of magnitude and the solve alone loses the residual's digits
        # (a round that does not shrink the residual ends them: the solve is then too poor for refinement to converge)
        x = _woodbury(rhs, u, gamma, factor)
        before, size = x, np.inf
        for _ in range(REFINE if best[0] < REFINE_FROM else 0):
            left = rhs - _margins(V @ (V.T @ _alpha(x, y, others, k)), y, others) - x / u
            left -= (c * x.sum(axis=1))[:, None]
            now = float(np.abs(left).max())
            if not now < size:
                return before
            before, size = x, now
            x = x + _woodbury(left, u, gamma, factor)
        return x

    def _woodbury(rhs, u, gamma, factor):
        t = _apply_binv(rhs, u, gamma)
        Ut = (V.T @ _alpha(t, y, others, k)).T.reshape(-1)  # U^T B^{-1} rhs, class by class (k, r)
        x = scipy.linalg.cho_solve(factor, Ut, check_finite=False).reshape(k, r)
        back = _margins(V @ x.T, y, others)  # U x
        return t - _apply_binv(back, u, gamma)

    steps = 0
    for steps in range(1, max_newton + 1):
        beta = np.maximum(beta, ipm.TINY)
        s = np.maximum(s, ipm.TINY)
        rp = beta.sum(axis=1) + s - C
        W = V.T @ _alpha(beta, y, others, k)  # (r, k): the classes' weights
        g = _margins(V @ W, y, others) + p
        rd = g - z + zeta[:, None]
        gap = float((beta * z).sum() + s @ zeta)
        obj = 0.5 * float((W * W).sum()) + p * float(beta.sum())
        res = float(np.abs(rd).max()) / max(1.0, float(np.abs(g).max())) + float(np.abs(rp).max()) / float(C.max())
        if gap <= GAP_TOL * max(1.0, abs(obj)) and res <= ipm.RES_TOL:
            return beta, steps
        merit = gap / max(1.0, abs(obj)) + res
        if merit < best[0]:
            best = (merit, beta.copy(), steps)
        elif best[0] <= STALL_FROM and steps - best[2] >= ipm.STALL_STEPS:
            return best[1], steps
        gaps.append(gap)
        falls = len(gaps) <= ipm.STALL_STEPS or gap <= ipm.GAP_FALL * gaps[-1 - ipm.STALL_STEPS]
        if steps > soft_limit and steps - best[2] >= ipm.STALL_STEPS and not falls:
            break  # past soft_limit only while the best iterate or the gap improves (dual_ipm.EXTENDED_NEWTON)
        mu = gap / n_con
        u = 1.0 / (z / beta + reg)
        c = zeta / s
        su = u.sum(axis=1)
        gamma = c / (1.0 + c * su)
        ut = np.zeros((n, k))  # u spread over the k classes (0 at the own class)
        ut[np.arange(n)[:, None], others] = u
        q = -ut  # q = P u
        q[np.arange(n), y] = su
        M = _newton_matrix(V, ut, su, gamma, q, groups)
        try:
            factor = scipy.linalg.cho_factor(M, lower=True, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            break
        # predictor: targets beta z = 0, s zeta = 0
        db = solve(-rd - z + (zeta - zeta * rp / s)[:, None], u, gamma, factor)
        ds = -rp - db.sum(axis=1)
        dz = (-beta * z - z * db) / beta
        dzeta = (-s * zeta - zeta * ds) / s
        ap = min(_longest(beta, db), _longest(s, ds))
        ad = min(_longest(z, dz), _longest(zeta, dzeta))
        affine = float(((beta + ap * db) * (z + ad * dz)).sum() + (s + ap * ds) @ (zeta + ad * dzeta))
        sigma = (affine / gap) ** 3 if gap > 0 else 0.0
        t1 = sigma * mu - beta * z - db * dz
        t2 = sigma * mu - s * zeta - ds * dzeta
        db = solve(-rd + t1 / beta - ((t2 + zeta * rp) / s)[:, None], u, gamma, factor)
        ds = -rp - db.sum(axis=1)
        dz = (t1 - z * db) / beta
        dzeta = (t2 - zeta * ds) / s
        ap = ipm.STEP_FRACTION * min(_longest(beta, db), _longest(s, ds))
        ad = ipm.STEP_FRACTION * min(_longest(z, dz), _longest(zeta, dzeta))
        beta = beta + ap * db
        s = s + ap * ds
        z = z + ad * dz
        zeta = zeta + ad * dzeta
        if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(z)) and np.all(np.isfinite(zeta))):
            break
    return (best[1] if best[0] <= ACCEPT else None), steps


@njit(cache=True, nogil=True)
def _alpha_into(x, y, others, A):
    """:func:`_alpha` into ``A`` (n, k), compiled."""
    for i in range(x.shape[0]):
        total = 0.0
        for j in range(x.shape[1]):
            A[i, others[i, j]] = -x[i, j]
            total += x[i, j]
        A[i, y[i]] = total


@njit(cache=True, nogil=True)
def _margins_into(S, y, others, shift, out):
    """:func:`_margins` plus ``shift`` into ``out`` (n, k - 1), compiled."""
    for i in range(S.shape[0]):
        own = S[i, y[i]]
        for j in range(out.shape[1]):
            out[i, j] = own - S[i, others[i, j]] + shift


@njit(cache=True, nogil=True)
def _binv(rhs, u, gamma):
    """:func:`_apply_binv`, compiled."""
    t = rhs * u
    for i in range(t.shape[0]):
        total = 0.0
        for j in range(t.shape[1]):
            total += t[i, j]
        total *= gamma[i]
        for j in range(t.shape[1]):
            t[i, j] -= total * u[i, j]
    return t


@njit(cache=True, nogil=True)
def _woodbury_c(rhs, u, gamma, L, V, y, others, A, out):
    """:func:`cs_qp`'s Woodbury solve, compiled: :math:`B^{-1}r - B^{-1}U M^{-1} U^T B^{-1} r` with ``M``'s
    Cholesky factor ``L`` (:func:`~.dual_ipm._cholesky`); ``A`` (n, k) and ``out`` (n, k - 1) are work arrays."""
    n, r = V.shape
    k = A.shape[1]
    t = _binv(rhs, u, gamma)
    _alpha_into(t, y, others, A)
    Ut = V.T @ A  # (r, k)
    b = np.empty(k * r)
    for c in range(k):
        for q in range(r):
            b[c * r + q] = Ut[q, c]
    x = _cho_solve(L, b)
    X = np.empty((r, k))
    for c in range(k):
        for q in range(r):
            X[q, c] = x[c * r + q]
    _margins_into(V @ X, y, others, 0.0, out)
    return t - _binv(out, u, gamma)


@njit(cache=True, nogil=True)
def _newton_matrix_c(V, y, others, ut, su, gamma, q):
    r""":func:`_newton_matrix`, compiled: the lower triangle of :math:`M = I + \sum_i T_i \otimes v_i v_i^T`, the
    block of classes :math:`(a, b)` as one product :math:`V^T \mathrm{diag}(T_{ab}) V` (:math:`k(k+1)/2` of them)."""
    n, r = V.shape
    k = ut.shape[1]
    M = np.zeros((k * r, k * r))
    T = np.empty(n)
    Vs = np.empty((n, r))
    for a in range(k):
        for b in range(a + 1):
            nonzero = False
            for i in range(n):
                own = y[i]
                v = -gamma[i] * q[i, a] * q[i, b]
                if a == b:
                    v += ut[i, a]
                    if a == own:
                        v += su[i]
                else:
                    if a == own:
                        v -= ut[i, b]
                    if b == own:
                        v -= ut[i, a]
                T[i] = v
                nonzero = nonzero or v != 0.0
            if not nonzero:
                continue
            for i in range(n):
                for j in range(r):
                    Vs[i, j] = V[i, j] * T[i]
            block = V.T @ Vs
            for p in range(r):
                for j in range(r if a != b else p + 1):
                    M[a * r + p, b * r + j] = block[p, j]
    for j in range(k * r):
        M[j, j] += 1.0
    return M


@njit(cache=True, nogil=True)
def _cs_ipm(
    V,
    y,
    others,
    C,
    p,
    max_newton,
    gap_tol,
    res_tol,
    stall_from,
    stall_steps,
    accept,
    reg_factor,
    fraction,
    tiny,
    refine,
    refine_from,
    soft_limit,
):
    r""":func:`cs_qp` compiled: the same predictor-corrector steps, refinement, stall and accept rules.  A Newton step
    of :func:`cs_qp` makes ~250 NumPy calls (~0.4 ms: 200 x 21 rows, 2 classes, 14 steps in 6 ms); here the same
    step is its arithmetic.  Returns ``(beta, steps, ok)``; ``ok`` False: failed."""
    n, r = V.shape
    m = others.shape[1]
    k = m + 1
    beta = np.empty((n, m))
    s = np.empty(n)
    top, cmax = 0.0, 0.0
    for i in range(n):
        for j in range(m):
            beta[i, j] = C[i] / (2.0 * k)
        s[i] = C[i] - beta[i].sum()
        norm = 0.0
        for j in range(r):
            norm += V[i, j] * V[i, j]
        top = max(top, norm)
        cmax = max(cmax, C[i])
    z = np.ones((n, m))
    zeta = np.ones(n)
    reg = reg_factor * max(top, 1.0)
    A = np.empty((n, k))
    g = np.empty((n, m))
    work = np.empty((n, m))
    ut = np.zeros((n, k))
    q = np.empty((n, k))
    rp = np.empty(n)
    best_merit, best_beta, best_step = np.inf, beta.copy(), 0
    gaps = np.full(max_newton + 1, np.inf)
    steps = 0
    for steps in range(1, max_newton + 1):
        for i in range(n):
            for j in range(m):
                beta[i, j] = max(beta[i, j], tiny)
            s[i] = max(s[i], tiny)
            rp[i] = beta[i].sum() + s[i] - C[i]
        _alpha_into(beta, y, others, A)
        W = V.T @ A
        _margins_into(V @ W, y, others, p, g)
        rd = g - z
        for i in range(n):
            for j in range(m):
                rd[i, j] += zeta[i]
        gap = (beta * z).sum() + s @ zeta
        obj = 0.5 * (W * W).sum() + p * beta.sum()
        res = np.abs(rd).max() / max(1.0, np.abs(g).max()) + np.abs(rp).max() / cmax
        verdict, merit = step_rule(
            steps, gap, obj, res, gaps, best_merit, best_step, gap_tol, res_tol, stall_from, stall_steps, soft_limit
        )
        if verdict == CONVERGED:
            return beta, steps, True
        if verdict == STALLED:
            return best_beta, steps, True
        if verdict == NO_PROGRESS:
            break
        if merit < best_merit:
            best_merit, best_beta, best_step = merit, beta.copy(), steps
        mu = gap / (n * k)
        u = 1.0 / (z / beta + reg)
        c = zeta / s
        su = np.empty(n)
        gamma = np.empty(n)
        for i in range(n):
            su[i] = u[i].sum()
            gamma[i] = c[i] / (1.0 + c[i] * su[i])
            for j in range(m):
                ut[i, others[i, j]] = u[i, j]
                q[i, others[i, j]] = -u[i, j]
            ut[i, y[i]] = 0.0
            q[i, y[i]] = su[i]
        L = _newton_matrix_c(V, y, others, ut, su, gamma, q)
        if not _cholesky(L):
            break
        rounds = refine if best_merit < refine_from else 0
        # predictor: targets beta z = 0, s zeta = 0
        rhs = -rd - z
        for i in range(n):
            for j in range(m):
                rhs[i, j] += zeta[i] - zeta[i] * rp[i] / s[i]
        db = _refined(rhs, u, gamma, c, L, V, y, others, A, work, rounds)
        ds = np.empty(n)
        for i in range(n):
            ds[i] = -rp[i] - db[i].sum()
        dz = (-beta * z - z * db) / beta
        dzeta = (-s * zeta - zeta * ds) / s
        ap = min(_longest_step(beta.ravel(), db.ravel()), _longest_step(s, ds))
        ad = min(_longest_step(z.ravel(), dz.ravel()), _longest_step(zeta, dzeta))
        affine = ((beta + ap * db) * (z + ad * dz)).sum() + (s + ap * ds) @ (zeta + ad * dzeta)
        sigma = (affine / gap) ** 3 if gap > 0 else 0.0
        t1 = sigma * mu - beta * z - db * dz
        t2 = sigma * mu - s * zeta - ds * dzeta
        rhs = -rd + t1 / beta
        for i in range(n):
            for j in range(m):
                rhs[i, j] -= (t2[i] + zeta[i] * rp[i]) / s[i]
        db = _refined(rhs, u, gamma, c, L, V, y, others, A, work, rounds)
        for i in range(n):
            ds[i] = -rp[i] - db[i].sum()
        dz = (t1 - z * db) / beta
        dzeta = (t2 - zeta * ds) / s
        ap = fraction * min(_longest_step(beta.ravel(), db.ravel()), _longest_step(s, ds))
        ad = fraction * min(_longest_step(z.ravel(), dz.ravel()), _longest_step(zeta, dzeta))
        beta = beta + ap * db
        s = s + ap * ds
        z = z + ad * dz
        zeta = zeta + ad * dzeta
        if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(z)) and np.all(np.isfinite(zeta))):
            break
    return best_beta, steps, best_merit <= accept


@njit(cache=True, nogil=True)
def _refined(rhs, u, gamma, c, L, V, y, others, A, work, rounds):
    """:func:`cs_qp`'s ``solve``, compiled: the Woodbury solve, then up to ``rounds`` rounds of iterative refinement
    against :math:`H + B` applied exactly, ended by a round that does not shrink the residual."""
    x = _woodbury_c(rhs, u, gamma, L, V, y, others, A, work)
    before, size = x, np.inf
    for _ in range(rounds):
        _alpha_into(x, y, others, A)
        _margins_into(V @ (V.T @ A), y, others, 0.0, work)
        left = rhs - work - x / u
        for i in range(x.shape[0]):
            total = c[i] * x[i].sum()
            for j in range(x.shape[1]):
                left[i, j] -= total
        now = np.abs(left).max()
        if not now < size:
            return before
        before, size = x, now
        x = x + _woodbury_c(left, u, gamma, L, V, y, others, A, work)
    return x


def _compiled(n, k, r):
    """Whether :func:`_interior` takes the compiled interior point (:data:`COMPILED_MAX_ORDER`,
    :data:`COMPILED_MAX`)."""
    return COMPILED and k * r <= COMPILED_MAX_ORDER and n * (k * r) ** 2 <= COMPILED_MAX


def _interior(V, y, k, C, p):
    """:func:`_cs_ipm` (compiled) where a Newton step's arithmetic is small, else :func:`cs_qp` (NumPy and BLAS's
    rank-n update).  Returns ``(beta or None, steps)``."""
    n, r = V.shape
    if not _compiled(n, k, r):
        return cs_qp(V, y, k, C, p=p)
    with ipm.one_blas_thread():
        beta, steps, ok = _cs_ipm(
            np.ascontiguousarray(V, dtype=np.float64),
            np.ascontiguousarray(y, dtype=np.int64),
            np.ascontiguousarray(_others(y, k), dtype=np.int64),
            np.ascontiguousarray(C, dtype=np.float64),
            float(p),
            EXTENDED_NEWTON,
            *compiled_rules(),
            REFINE,
            REFINE_FROM,
            ipm.MAX_NEWTON,
        )
    return (beta if ok else None), steps


def _newton_matrix(V, ut, su, gamma, q, groups):
    r"""The lower triangle of :math:`M = I + \sum_i T_i \otimes v_i v_i^T` (rows and columns ordered class by class),
    from :math:`T_i = P_i\,\mathrm{diag}(u_i)P_i^T - \gamma_i q_i q_i^T` written out:
    :math:`P\,\mathrm{diag}(u)P^T = \mathrm{diag}(\tilde u) + (\textstyle\sum u)\,e_y e_y^T - e_y\tilde u^T -
    \tilde u e_y^T` (:math:`\tilde u`: ``ut``, the values at the other classes).  The diagonal part is one weighted
    Gram matrix a class, the own-class parts one product per class over its rows (``groups``), and the rank-one
    parts one symmetric rank-n update :math:`F^TF`, :math:`F_i = \sqrt{\gamma_i}\, q_i \otimes v_i` (BLAS's
    ``syrk``: :math:`n k^2 r^2` flops, most of the step; an earlier version formed every :math:`T_i` and made
    twice the flops in :math:`k` general products)."""
    n, r = V.shape
    k = ut.shape[1]
    M = np.zeros((k, r, k, r))
    for c, rows in enumerate(groups):
        if rows.shape[0] == 0:
            continue
        Vc = V[rows]
        M[c, :, c, :] += Vc.T @ (Vc * su[rows, None])
        # (r, k, r): the class's sum of ut[i, m] v_i v_i^T for every m at once (ut[i, c] = 0 here): the blocks
        # (c, m) and (m, c) take it negated, the diagonal blocks (m, m) summed over the classes c
        B = (Vc.T @ (ut[rows][:, :, None] * Vc[:, None, :]).reshape(rows.shape[0], k * r)).reshape(r, k, r)
        M[c] -= B
        Bt = B.transpose(1, 0, 2)
        M[:, :, c, :] -= Bt
        M[np.arange(k), :, np.arange(k), :] += Bt
    M = M.reshape(k * r, k * r)
    F = (np.sqrt(gamma)[:, None, None] * q[:, :, None] * V[:, None, :]).reshape(n, k * r)
    M -= scipy.linalg.blas.dsyrk(1.0, F.T, trans=0, lower=1)  # (F.T: Fortran order, no copy)
    M[np.diag_indices(k * r)] += 1.0
    return M


def _longest(x, dx):
    """The longest step ``t <= 1`` with ``x + t dx >= 0`` (``x > 0``), for arrays of any shape."""
    return _longest_step(np.ravel(x), np.ravel(dx))


def scaled_qp(V, y, k, C):
    """:func:`cs_qp` with the objective divided by the median of :math:`\\|v_i\\|^2` times the largest ``C`` where
    that is above :data:`~.dual_ipm.SCALE_FROM` (unscaled columns: the multipliers start at 1, far from the
    gradient's scale), else as it is; where that run fails or uses up its steps, once more with the other scale,
    and the better result kept (as :func:`~.dual_ipm.box_qp`).  Returns ``(beta or None, steps)``."""
    others = _others(y, k)
    best, steps = None, 0
    for scale in scales_to_try(V, float(C.max())):
        beta, used = _interior(V / np.sqrt(scale), y, k, C, -1.0 / scale)
        steps += used
        if beta is not None:
            beta = _feasible(beta, C)
            W = V.T @ _alpha(beta, y, others, k)
            value = 0.5 * float((W * W).sum()) - float(beta.sum())
            if best is None or value < best[0]:
                best = (value, beta)
        if beta is not None and used < EXTENDED_NEWTON:
            break
    return (None if best is None else best[1]), steps


def _feasible(beta, C):
    """``beta`` clipped at 0, each sample's values scaled down where their sum exceeds ``C_i`` (rounding)."""
    beta = np.maximum(beta, 0.0)
    total = beta.sum(axis=1)
    over = total > C
    if over.any():
        beta[over] *= (C[over] / total[over])[:, None]
    return beta


def interior_seconds(n, k, r):
    """The estimated time of :data:`ESTIMATED_STEPS` Newton steps of :func:`cs_qp` on ``n`` samples, ``k`` classes
    and ``r`` columns: ``M``'s rank-n update, its class blocks and factor (:func:`_newton_matrix`), the solves, and
    NumPy's fixed cost."""
    kr = k * r
    flops = n * kr * kr + 2.0 * n * k * r * r + kr**3 / 3.0 + 3 * (1 + REFINE) * 8.0 * n * kr
    return ESTIMATED_STEPS * (flops / FLOP_RATE + (STEP_SECONDS_COMPILED if _compiled(n, k, r) else STEP_SECONDS))


def _watch(ld, k, max_iter, enabled, deadline=None):
    """The ``stall`` argument of :func:`~maxmargin.solvers.crammer_singer.solve`: a
    :class:`~maxmargin.solvers.dual_primal.StallWatch` over ``max_iter`` epochs that switches where the interior point
    fits (:data:`MAX_VALUES`, :data:`MAX_ORDER`), costs less than :data:`EXTEND` times the epochs left of
    ``max_iter`` (an epoch's cost from :data:`ROW_SECONDS`, :data:`ROW_CLASS_SECONDS` and the values' seconds), and
    the relative duality gap at the look is above :data:`FAR`; None where ``max_iter`` is at most LIBLINEAR's 300 or
    the switch is off.  ``deadline`` (``time.perf_counter()`` seconds): no switch whose estimate runs past it."""
    if not enabled or max_iter <= DUAL_EPOCHS:
        return None
    n, r = max(ld.n_samples, 1), ld.n_weights
    if not (n * k * r <= MAX_VALUES and k * r <= MAX_ORDER):
        return None
    row_values = ld.n_features if ld.dense else ld.indptr[-1] / n
    per_value = VALUE_CLASS_SECONDS if ld.dense else VALUE_CLASS_SECONDS_CSR
    per_row = ROW_SECONDS + k * ROW_CLASS_SECONDS + row_values * k * per_value
    cost = interior_seconds(n, k, r)
    every = look_every(ld)

    seen = {}

    def worth(t, active, epochs, converging):
        # The violation of these epochs falls and jumps unevenly, and its extrapolation misleads both ways (200 x
        # 20 rows: flat at 4-5 for 60 epochs, then converged by ~250; breast cancer: "converging" by epoch 50,
        # still at 5.2x the optimum after 1,000).  The duality gap decides instead: where it is within FAR of the
        # primal objective the epochs go on; where it is not, the switch is priced against EXTEND times the epochs
        # still to run.
        if deadline is not None and time.perf_counter() + cost > deadline:
            return False  # (the interior point does not look at the clock while it runs)
        # (priced on every sample, not the active ones: this solver unshrinks to all of them before it may stop,
        # and the model was measured on whole runs -- breast cancer's active count at a look, ~200 of 450, priced
        # its 950 epochs left below the interior point)
        left = EXTEND * max(max_iter - t, 0)
        if not cost < left * n * per_row or t < seen.get("next", 0):
            return False
        # (after a gap within FAR the next is measured a quarter of the epochs on: the gap is a pass over every
        # sample and class, where the shrunk epochs visit few -- 600 dense rows of 20 features in 3 classes, 268
        # epochs: a look every 10 epochs took ~0.75 ms of a 4 ms fit)
        far = seen["measure"]()[3]() > FAR
        if not far:
            seen["next"] = t + max(every, t // 4)
        return bool(far)

    def stall(measure):
        seen["measure"] = measure
        return StallWatch(measure, max_iter, every=every, worth=worth)

    return stall


def solve(ld, y, n_classes, C, *, tol=0.1, max_iter=1000, stall=True, time_limit=None, verbose=False, **options):
    r""":func:`~maxmargin.solvers.crammer_singer.solve` (the epochs), then the interior point where they stall (module
    docstring), accepted, polished by the epochs or kept as :func:`~maxmargin.solvers.dual_ipm._finish` decides.
    ``options`` go to the epochs (``seed``, ``alpha0``, ``callback``, ...).  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` (``w``: (k, n_weights)) with ``interior_steps`` set."""
    t0 = time.perf_counter()
    k = int(n_classes)
    y = np.ascontiguousarray(y, dtype=np.int64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    n = y.shape[0]
    watch = _watch(ld, k, int(max_iter), stall, None if time_limit is None else t0 + float(time_limit))

    def dual(start, iters, limit, watch=None):
        opts = dict(options, alpha0=start) if start is not None else options
        return crammer_singer.solve(
            ld, y, k, C, tol=tol, max_iter=iters, stall=watch, time_limit=limit, verbose=verbose, **opts
        )

    first = dual(options.pop("alpha0", None), int(max_iter), time_limit, watch)
    if first.status != "stalled":
        first.interior_steps = 0
        return first

    def interior(rows, alpha, W):
        V = signed_rows(ld, np.arange(n), np.ones(n))
        keep = C > 0.0  # (samples of no weight keep alpha 0)
        beta, steps = scaled_qp(V[keep], y[keep], k, C[keep])
        if beta is None:
            return None, None, steps
        A = np.zeros((n, k))
        A[keep] = _alpha(beta, y[keep], _others(y[keep], k), k)
        return A, np.ascontiguousarray((V.T @ A).T), steps

    def certify(alpha, W):
        primal = crammer_singer._primal(*ld.args(), y, C, np.ascontiguousarray(W.T))
        fit = LinearFit(W, alpha, primal, crammer_singer.dual_objective(W, alpha, y), 0, np.nan, "converged")
        fit.violation = fit.gap / max(abs(primal), 1e-300)
        return fit

    return _finish(
        first,
        dual,
        interior,
        lambda alpha, W, held: np.zeros(int(held.sum()), dtype=bool),
        lambda count: True,
        certify,
        look_every(ld),
        tol,
        max_iter,
        time_limit,
        t0,
        verbose,
        accept=GAP_ACCEPT,
    )
