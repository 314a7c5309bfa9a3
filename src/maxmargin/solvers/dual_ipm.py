r"""L1-loss linear SVMs (hinge, epsilon-insensitive): dual coordinate descent, then an interior point on the
low-rank dual where the epochs stall.

Dual coordinate descent for the hinge loss (LIBLINEAR's ``-s 3``) and the epsilon-insensitive loss (``-s 13``)
converges linearly at a rate set by the conditioning of :math:`\bar Q`; on unscaled dense columns it hardly
moves.  Breast cancer's 30 columns (scale 0.001 to 2,500), hinge loss, C = 1: after scikit-learn's 1,000 epochs
the primal objective is 195, after LIBLINEAR's 300 it is 278, and the optimum is 35.5 (session 39).  There is no
smooth primal to switch to, as :mod:`~maxmargin.solvers.dual_primal` does for the squared losses.  But where the
rows are few or short, the dual's matrix has low rank -- :math:`\bar Q = VV^T` with :math:`V` the rows (and the
bias feature) signed by the labels, :math:`n \times m` -- and a primal-dual interior point
(:func:`~maxmargin.solvers.ipm.interior_point`, the box alone) solves it in 15-40 Newton steps of
:math:`O(nk^2)` each, :math:`k = \min(n, m)` (for :math:`n < m` the rows are first reduced to the triangular
factor of their QR decomposition, :math:`VV^T = R^TR`):

.. math:: \min_\alpha \tfrac12\alpha^T VV^T\alpha - e^T\alpha, \quad 0 \le \alpha_i \le C_i
          \qquad\text{(seed 002's 1-norm soft-margin dual, the bias a feature: no equality)},

and for regression, with :math:`\beta = \alpha^+ - \alpha^-` on :math:`2n` variables,

.. math:: \min_{\alpha^\pm} \tfrac12(\alpha^+ - \alpha^-)^T XX^T(\alpha^+ - \alpha^-)
          + (\epsilon e - y)^T\alpha^+ + (\epsilon e + y)^T\alpha^-, \quad 0 \le \alpha^\pm_i \le C_i .

The epochs run first, watched by a :class:`~maxmargin.solvers.dual_primal.StallWatch` whose budget is
``max_iter``; it switches where the interior point on the rows shrinking left active costs less than the epochs
still to run (:func:`_watch`: estimates from the sizes, :func:`interior_seconds`, :func:`epoch_seconds`).  The
interior point's result is the fit where the SVM's relative duality gap is within ``min(1e-5, tol)``; else the
epochs start from it, with fallbacks to the epochs from the stall and to the interior point's own result
(:func:`_finish`).  ``n_iter`` counts the epochs and the Newton steps; the fit's ``interior_steps`` the latter and
``interior_rows`` the rows it ran on.
"""

from __future__ import annotations

import functools
import time

import numpy as np
from numba import njit, prange

from .._jit import parallel
from .._threads import cores
from . import dual_cd, ipm
from ._linear_common import all_dots, l2_cache_bytes
from .dual_primal import DUAL_EPOCHS, StallWatch, _remaining, look_every

#: the interior point only for at most this many values of its matrix V (n x k; 64 MiB): it holds three such arrays
MAX_VALUES = 1 << 23
#: Newton steps assumed by the cost estimate (observed 14-25 on most problems, 40-60 on some of letter26's)
ESTIMATED_STEPS = 25
#: multiply-adds a second assumed for a Newton step's BLAS work on one core (1,400 x 65 rows: 21 steps in 20 ms;
#: 60,000 x 55 rows: 25 steps in 1.24 s), plus seconds a step of Python and small arrays
FLOP_RATE = 8e9
STEP_SECONDS = 3e-4
STEP_SECONDS_COMPILED = 2e-5
#: an epoch of the dual coordinate descent: seconds a stored value where the rows fit in the L2 cache (sessions
#: 33-36: 1.1-1.8 ns), where they do not (session 39: 60,000 rows of 14 values, 6.7 MB, LinearSVR: 5.5 ns), and a
#: row (~10 ns a row of 21 values)
VALUE_SECONDS = 1.2e-9
VALUE_SECONDS_OUT = 5e-9
ROW_SECONDS = 1e-8
#: the interior point stops at this relative duality gap, or once its best iterate's gap plus residual is within
#: STALL_FROM and three steps have not improved on it: the epochs that follow finish the job (unscaled columns
#: of up to 3,000, regression: the relative residual stays at 3e-4 from the 10th step while the gap falls to
#: 1e-16 at the 19th, then jumps to 7e-2)
GAP_TOL = 1e-9
STALL_FROM = 1e-3
#: the interior point's objective is divided by the median of diag(Q) times the largest C where that is above
#: SCALE_FROM: it starts its multipliers at 1, far from the scale of the gradient on unscaled columns (a one-vs-rest
#: problem of covlike7, columns up to 8,300: residual still 1.0 after 60 steps; scaled: 13 steps), and scaling the
#: sets of smaller values slowed them (a9a 26 -> 44-52 steps, a letter26 problem 17 -> 51)
SCALE_FROM = 1e5
#: a run that uses up its Newton steps counts as failed unless its best relative gap plus residual is within this
#: (two of covlike7's seven problems crawled from step 14 on, gap 2e-5 after 60; the epochs from there ended at an
#: objective 2.6x that of the epochs alone)
ACCEPT = 1e-6
#: the interior point's result is the fit where its relative duality gap (the SVM's primal and dual objectives) is
#: within this, or within ``tol`` where that is smaller; else the epochs start from it.  (The epochs' own results at
#: LIBLINEAR's tol 0.1: a9a 2.2e-4, ijcnn1 1.5e-4, text2 4.7e-3.)
GAP_ACCEPT = 1e-5
#: the interior point runs up to :data:`~.ipm.MAX_NEWTON` Newton steps, and on to EXTENDED_NEWTON while its best
#: iterate is recent or its duality gap still falls (:func:`~.ipm.interior_point`'s ``soft_limit``).  Skin_NonSkin's
#: 100,000 unscaled rows (0..255, rank 4): the merit stays at the start's for ~55 steps while the gap falls, then the
#: run converges by step ~70; at 60 both scales failed, and the hinge loss's epochs ran on to max_iter at 1.6x the
#: optimum (7.4 s; now 0.7 s).  covlike7's last one-vs-rest problem: its best iterate improves slowly to step 104.
EXTENDED_NEWTON = 2 * ipm.MAX_NEWTON
#: the compiled interior point (:func:`_box_ipm`) for at most COMPILED_MAX_K columns and COMPILED_MAX of n k^2
#: (session 39, ms, NumPy -> compiled: 200 x 21 rows 17.5 -> 0.5, 450 x 31 8.0 -> 1.7, 1,400 x 65 29 -> 16,
#: 15,000 x 17 42 -> 28, 60,000 x 55 1,177 -> 1,018; but 300 x 300 25 -> 62: its Cholesky factor is a plain loop)
COMPILED = True
COMPILED_MAX_K = 128
COMPILED_MAX = 1 << 28
#: interior points at most after a stall: the active rows, then with the held rows that violate their conditions
ROUNDS = 4
#: ... and every row from the start where this share of them is active (covlike: 59,973 of 60,000 active, one held
#: row joined, and the second interior point cost as much as the first)
ALL_FROM = 0.5


def interior_seconds(n, m):
    """The estimated time of :data:`ESTIMATED_STEPS` Newton steps on ``n`` variables of rank ``m`` (rows reduced to
    ``k = min(n, m)`` columns): a rank-n update of ``k x k`` plus a few products of ``n x k`` a step."""
    k = min(n, m)
    flops = ESTIMATED_STEPS * (n * k * (k + 20.0)) + (2.0 * m * n * n if n < m else 0.0)
    step = STEP_SECONDS_COMPILED if _compiled(n, k) else STEP_SECONDS
    return flops / FLOP_RATE + ESTIMATED_STEPS * step


def _compiled(n, k):
    """Whether :func:`_interior` takes the compiled interior point for ``n`` variables of ``k`` columns."""
    return COMPILED and k <= COMPILED_MAX_K and n * k * k <= COMPILED_MAX


def fits(n, m):
    """Whether the interior point's arrays for ``n`` variables of rank ``m`` are small enough
    (:data:`MAX_VALUES`)."""
    return n * min(n, m) <= MAX_VALUES


def signed_rows(ld, rows, sign):
    r""":math:`V = \mathrm{diag}(sign)\,[X, \text{bias}]` over ``rows`` as a dense float64 array (``ld``: a
    :class:`~maxmargin.solvers._linear_common.LinearData`)."""
    sign = np.asarray(sign, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.int64)
    V = np.empty((rows.shape[0], ld.n_weights))
    if ld.dense:
        np.multiply(ld.Xd[rows], sign[:, None], out=V[:, : ld.n_features])
    else:  # (scipy's row indexing and toarray: 0.27 ms of a 1.2 ms fit on 200 x 20 rows)
        _signed_csr_rows(ld.data, ld.indices, ld.indptr, bool(ld.unit), rows, sign, V)
    if ld.bias > 0:
        V[:, ld.n_features] = ld.bias * sign
    return V


@njit(cache=True, nogil=True)
def _signed_csr_rows(data, indices, indptr, unit, rows, sign, V):
    """``V[r, :n_features]`` = ``sign[r]`` times CSR row ``rows[r]`` (dense; the columns past the features kept)."""
    nf = V.shape[1]
    for r in range(rows.shape[0]):
        i = rows[r]
        for j in range(nf):
            V[r, j] = 0.0
        for t in range(indptr[i], indptr[i + 1]):
            V[r, indices[t]] = sign[r] * (1.0 if unit else np.float64(data[t]))


def reduced(V):
    """``V`` itself, or where it has fewer rows than columns the ``n x n`` :math:`R^T` of the QR decomposition of
    :math:`V^T` (the same :math:`VV^T`)."""
    if V.shape[0] >= V.shape[1]:
        return V
    return np.ascontiguousarray(np.linalg.qr(V.T, mode="r").T)


@njit(cache=True, nogil=True)
def _cholesky(M):
    """The lower Cholesky factor of ``M`` in place (its upper part left as it was); False where a pivot is not
    positive (``M`` not positive definite in rounding)."""
    k = M.shape[0]
    for j in range(k):
        d = M[j, j]
        for t in range(j):
            d -= M[j, t] * M[j, t]
        if not d > 0.0:
            return False
        d = np.sqrt(d)
        M[j, j] = d
        for i in range(j + 1, k):
            v = M[i, j]
            for t in range(j):
                v -= M[i, t] * M[j, t]
            M[i, j] = v / d
    return True


@njit(cache=True, nogil=True)
def _cho_solve(L, b):
    """``(L L^T)^{-1} b`` for the lower factor ``L`` of :func:`_cholesky`."""
    k = L.shape[0]
    x = b.copy()
    for i in range(k):
        v = x[i]
        for t in range(i):
            v -= L[i, t] * x[t]
        x[i] = v / L[i, i]
    for i in range(k - 1, -1, -1):
        v = x[i]
        for t in range(i + 1, k):
            v -= L[t, i] * x[t]
        x[i] = v / L[i, i]
    return x


@njit(cache=True, nogil=True)
def _longest_step(x, dx):
    """The longest step ``t <= 1`` with ``x + t dx >= 0`` (``x > 0``)."""
    t = 1.0
    for i in range(x.shape[0]):
        if dx[i] < 0.0:
            r = x[i] / -dx[i]
            if r < t:
                t = r
    return t


#: :func:`step_rule`'s verdicts
GO_ON, CONVERGED, STALLED, NO_PROGRESS = 0, 1, 2, 3


@njit(cache=True, nogil=True, inline="always")
def step_rule(steps, gap, obj, res, gaps, best_merit, best_step, gap_tol, res_tol, stall_from, stall_steps, soft_limit):
    """The compiled interior points' test after a step's residuals (:func:`_box_ipm`, :func:`~.cs_ipm._cs_ipm`; as
    :func:`~.ipm.interior_point`): ``(verdict, merit)``.  CONVERGED: gap and residual within tolerance; STALLED:
    the best iterate (relative gap plus residual within ``stall_from``) is ``stall_steps`` old; NO_PROGRESS: past
    ``soft_limit`` steps the best iterate is ``stall_steps`` old and the gap did not fall to
    :data:`~.ipm.GAP_FALL` of its value ``stall_steps`` before (``gaps``: the steps' gaps, written here); else
    GO_ON (the caller keeps the iterate where ``merit`` beats ``best_merit``)."""
    if gap <= gap_tol * max(1.0, abs(obj)) and res <= res_tol:
        return CONVERGED, 0.0
    merit = gap / max(1.0, abs(obj)) + res
    gaps[steps] = gap
    if merit < best_merit:
        return GO_ON, merit
    if best_merit <= stall_from and steps - best_step >= stall_steps:
        return STALLED, merit
    falls = gap <= ipm.GAP_FALL * gaps[max(steps - stall_steps, 0)]
    if steps > soft_limit and steps - best_step >= stall_steps and not falls:
        return NO_PROGRESS, merit
    return GO_ON, merit


#: :func:`_box_ipm` forms :math:`M = I + V^T E V` from blocks of this many scaled rows, and applies :math:`EV` as
#: :math:`E(Vx)`: on tall ``V`` a Newton step is passes over memory, and storing the scaled copies :math:`E^{1/2}V`
#: and :math:`EV` (two ``n x k`` arrays written, then read by the product and four matrix-vector products) made
#: most of it.  Session 51, covlike's 60,000 x 55 rows (the hinge loss after the epochs stalled, 28 steps): 640 -> 533
#: ms, the same steps.  (Carrying :math:`V^Ta` from step to step instead of its product -- the corrector's solve is
#: :math:`V^T\Delta a` up to the solve's residual -- saved another 37 ms, but on breast cancer's unscaled columns that
#: residual moved the result 1.7e-6 from the optimum: not kept.)
SCALED_BLOCK_ROWS = 256
#: ... or as many rows as hold this many values, where that is more (narrow rows: a product a block of 256 rows of
#: skin's 4 columns cost more than its arithmetic.  A plain loop instead, one running sum an entry of M, lost enough
#: precision on skin's unscaled columns that the interior point's first scale failed where it had converged.)
SCALED_BLOCK_VALUES = 16384
#: ... and the step's products on the cores' threads (the rows split between them; BLAS on one thread, see
#: :func:`_interior`) where ``V`` has at least PARALLEL_MIN_K columns and ``n k^2`` is at least PARALLEL_GRAM_MIN.
#: Session 51, ms a solve, one thread / two: covlike's 60,000 x 55 rows 530 / 334 (the whole fit 0.49x the session's
#: start with the blocks), 20,000 x 55 115 / 90, 5,000 x 55 27 / 22, 2,000 x 55 10.0 / 10.0, 60,000 x 16 155 / 135;
#: but 1,000 x 55 4.4 / 5.4, 20,000 x 10 26 / 33, 100,000 x 5 134 / 163 (narrow rows: the threads' loops lose to
#: BLAS's matrix-vector products).
PARALLEL_MIN_K = 16
PARALLEL_GRAM_MIN = 1 << 23


@njit(cache=True, nogil=True)
def block_rows(n, k):
    """Rows of a block of :func:`_scaled_gram_into` for ``n`` rows of ``k`` columns."""
    return min(n, max(SCALED_BLOCK_ROWS, SCALED_BLOCK_VALUES // max(k, 1)))


@njit(cache=True, nogil=True)
def _scaled_gram_into(M, V, Ei, lo, hi, B):
    """``M += V[lo:hi]' E V[lo:hi]`` (``E = diag(Ei)``), through blocks of scaled rows in ``B``."""
    rows, k = B.shape
    for start in range(lo, hi, rows):
        m = min(rows, hi - start)
        for i in range(m):
            r = np.sqrt(Ei[start + i])
            for j in range(k):
                B[i, j] = V[start + i, j] * r
        Bm = B[:m]
        M += Bm.T @ Bm


def _scaled_gram_chunks(V, Ei, chunks):
    """:math:`V^T E V` over ``chunks`` ranges of rows on threads (each a BLAS call a block), summed in order."""
    n, k = V.shape
    parts = np.zeros((chunks, k, k))
    for c in prange(chunks):
        B = np.empty((block_rows(n, k), k))
        _scaled_gram_into(parts[c], V, Ei, c * n // chunks, (c + 1) * n // chunks, B)
    M = parts[0].copy()
    for c in range(1, chunks):
        M += parts[c]
    return M


_scaled_gram_parallel = parallel(_scaled_gram_chunks, nogil=True)


def _times_chunks(V, x, chunks):
    """:math:`Vx` over ``chunks`` ranges of rows on threads."""
    n, k = V.shape
    out = np.empty(n)
    for c in prange(chunks):
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            t = 0.0
            for j in range(k):
                t += V[i, j] * x[j]
            out[i] = t
    return out


def _times_t_chunks(V, y, chunks):
    """:math:`V^Ty` over ``chunks`` ranges of rows on threads, the ranges' sums added in order."""
    n, k = V.shape
    parts = np.zeros((chunks, k))
    for c in prange(chunks):
        acc = parts[c]
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            yi = y[i]
            for j in range(k):
                acc[j] += V[i, j] * yi
    out = parts[0].copy()
    for c in range(1, chunks):
        out += parts[c]
    return out


_times_parallel = parallel(_times_chunks, nogil=True)
_times_t_parallel = parallel(_times_t_chunks, nogil=True)


@njit(cache=True, nogil=True)
def _box_ipm(
    V,
    p,
    U,
    max_newton,
    gap_tol,
    res_tol,
    stall_from,
    stall_steps,
    accept,
    reg_factor,
    fraction,
    tiny,
    soft_limit,
    chunks=1,
):
    r""":func:`~maxmargin.solvers.ipm.interior_point` with ``y`` None (the box :math:`0 \le a \le U`, ``U``
    finite) and no shift, compiled: the same predictor-corrector steps, stall and accept rules.  One Newton step of
    the Python version makes ~40 NumPy calls, ~0.3 ms on small problems (breast cancer's 450 x 31: 26 steps, 8 ms);
    here the same step is ~0.02 ms plus its arithmetic.  Returns ``(a, steps, ok)``; ``ok`` False: failed."""
    n, k = V.shape
    a = 0.5 * U
    z = np.ones(n)
    w = np.ones(n)
    scale = 1.0
    top = 0.0
    for i in range(n):
        scale = max(scale, abs(p[i]))
        q = 0.0
        for j in range(k):
            q += V[i, j] * V[i, j]
        top = max(top, q)
    reg = reg_factor * top
    best_merit, best_a, best_step = np.inf, a.copy(), 0
    gaps = np.full(max_newton + 1, np.inf)
    B = np.empty((block_rows(n, k), k))
    steps = 0
    for steps in range(1, max_newton + 1):
        s = np.empty(n)
        for i in range(n):
            a[i] = max(a[i], tiny)
            s[i] = max(U[i] - a[i], tiny)
        g = (_times_parallel(V, _times_t_parallel(V, a, chunks), chunks) if chunks > 1 else V @ (V.T @ a)) + p
        rd = g - z + w
        gap = z @ a + w @ s
        obj = 0.5 * (a @ (g + p))
        rscale = max(scale, np.abs(g).max())
        res = np.abs(rd).max() / rscale
        verdict, merit = step_rule(
            steps, gap, obj, res, gaps, best_merit, best_step, gap_tol, res_tol, stall_from, stall_steps, soft_limit
        )
        if verdict == CONVERGED:
            return a, steps, True
        if verdict == STALLED:
            return best_a, steps, True
        if verdict == NO_PROGRESS:
            break
        if merit < best_merit:
            best_merit, best_a, best_step = merit, a.copy(), steps
        mu = gap / (2.0 * n)
        Ei = 1.0 / (z / a + w / s + reg)
        # M = I + V' E V, a block of scaled rows at a time (in cache; E V is never stored: see SCALED_BLOCK_ROWS)
        if chunks > 1:
            M = _scaled_gram_parallel(V, Ei, chunks)
        else:
            M = np.zeros((k, k))
            _scaled_gram_into(M, V, Ei, 0, n, B)
        for j in range(k):
            M[j, j] += 1.0
        if not _cholesky(M):
            return a, steps, False
        # predictor (targets z a = 0, w s = 0), then the corrector with its products; (E V) x = E (V x)
        r1 = -rd - z + w
        if chunks > 1:
            da = Ei * (r1 - _times_parallel(V, _cho_solve(M, _times_t_parallel(V, Ei * r1, chunks)), chunks))
        else:
            da = Ei * (r1 - V @ _cho_solve(M, V.T @ (Ei * r1)))
        dz = (-z * a - z * da) / a
        dw = (-w * s + w * da) / s
        ap = min(_longest_step(a, da), _longest_step(s, -da))
        ad = min(_longest_step(z, dz), _longest_step(w, dw))
        affine = (a + ap * da) @ (z + ad * dz) + (s - ap * da) @ (w + ad * dw)
        sigma = (affine / gap) ** 3 if gap > 0 else 0.0
        tz = sigma * mu - z * a - da * dz
        tw = sigma * mu - w * s + da * dw
        r2 = -rd + tz / a - tw / s
        if chunks > 1:
            da = Ei * (r2 - _times_parallel(V, _cho_solve(M, _times_t_parallel(V, Ei * r2, chunks)), chunks))
        else:
            da = Ei * (r2 - V @ _cho_solve(M, V.T @ (Ei * r2)))
        dz = (tz - z * da) / a
        dw = (tw + w * da) / s
        ap = fraction * min(_longest_step(a, da), _longest_step(s, -da))
        ad = fraction * min(_longest_step(z, dz), _longest_step(w, dw))
        a = a + ap * da
        z = z + ad * dz
        w = w + ad * dw
        if not np.all(np.isfinite(a)):
            return a, steps, False
    if accept >= 0.0:
        return best_a, steps, best_merit <= accept
    return (best_a if steps < max_newton else a), steps, True


def compiled_rules():
    """The stopping and step rules the compiled interior points take after ``max_newton`` (:func:`_box_ipm`,
    :func:`~.cs_ipm._cs_ipm`): gap and residual tolerances, stall, accept, regularisation, step fraction, floor."""
    return GAP_TOL, ipm.RES_TOL, STALL_FROM, ipm.STALL_STEPS, ACCEPT, ipm.REG, ipm.STEP_FRACTION, ipm.TINY


def _interior(V, p, U):
    """:func:`_box_ipm` (compiled) where a Newton step's arithmetic is small (:data:`COMPILED_MAX`), else
    :func:`~maxmargin.solvers.ipm.interior_point` (NumPy and BLAS's rank-n update).  Returns ``(a or None,
    steps)``."""
    n, k = V.shape
    if _compiled(n, k):
        with ipm.one_blas_thread():
            a, steps, ok = _box_ipm(
                np.ascontiguousarray(V, dtype=np.float64),
                np.ascontiguousarray(p, dtype=np.float64),
                np.ascontiguousarray(U, dtype=np.float64),
                EXTENDED_NEWTON,
                *compiled_rules(),
                ipm.MAX_NEWTON,
                cores() if k >= PARALLEL_MIN_K and n * k * k >= PARALLEL_GRAM_MIN else 1,
            )
        return (a if ok else None), steps
    return ipm.interior_point(
        V,
        None,
        p,
        U,
        np.zeros(U.shape[0]),
        0.0,
        max_newton=EXTENDED_NEWTON,
        gap_tol=GAP_TOL,
        stall_from=STALL_FROM,
        accept=ACCEPT,
        soft_limit=ipm.MAX_NEWTON,
    )


def scales_to_try(V, top):
    """The objective's divisors in the order :func:`box_qp` tries them: the median of diag(V V^T) times ``top`` (the
    largest bound) first where that is above :data:`SCALE_FROM`, else 1 first; one of them where they are equal."""
    diag = np.einsum("ij,ij->i", V, V)
    sigma = max(float(np.median(diag)) * top if diag.size else 1.0, 1.0)
    scales = (sigma, 1.0) if sigma > SCALE_FROM else (1.0, sigma)
    return scales[:1] if scales[0] == scales[1] else scales


def box_qp(V, p, U):
    r"""The interior point (:func:`~maxmargin.solvers.ipm.interior_point`) for :math:`\min \tfrac12 a^TVV^Ta +
    p^Ta`, :math:`0 \le a \le U`, scaled by :data:`SCALE_FROM`'s rule; where that run fails (:data:`ACCEPT`) or
    uses up its Newton steps, once more with the other scale (1, or the median of diag(Q) times the largest
    ``U``), and the better result kept (letter26: a problem that took 60 steps unscaled took 51 scaled).  Returns
    ``(a, steps)`` (steps of both runs); ``a`` None where both failed.  The values near a bound are *not* put on
    it, as for SMO's start (:func:`~maxmargin.solvers.ipm._rounded`): they sit ~1e-7 inside and the free values
    make up for them, so on unscaled columns the primal point moves far (breast cancer's regression: primal
    objective 101.95, rounded 2,652, the dual objective the same to 5e-7)."""
    best, steps = None, 0
    for scale in scales_to_try(V, float(U.max())):
        a, k = _interior(V / np.sqrt(scale), p / scale, U)
        steps += k
        if a is not None:
            a = np.clip(a, 0.0, U)
            t = V.T @ a
            value = 0.5 * float(t @ t) + float(p @ a)
            if best is None or value < best[0]:
                best = (value, a)
        if a is not None and k < EXTENDED_NEWTON:
            break
    return (None if best is None else best[1]), steps


def epoch_seconds(active, row_values, in_cache=True):
    """The estimated time of an epoch over ``active`` rows of ``row_values`` stored values on average (``in_cache``:
    whether the rows fit in the L2 cache)."""
    return active * (row_values * (VALUE_SECONDS if in_cache else VALUE_SECONDS_OUT) + ROW_SECONDS)


def _watch(ld, per_row, max_iter, enabled, deadline=None):
    """The ``stall`` argument of the dual solvers: a :class:`StallWatch` over ``max_iter`` epochs that switches
    where the interior point on the active rows (``per_row`` variables each) fits (:func:`fits`) and costs less
    than the epochs still to run -- to ``max_iter`` where they will not meet ``tol`` by then, else, for rows that
    fit in the L2 cache, as many as the watch extrapolates (200 x 20 random rows: 402 epochs to ``tol``, 1.6 ms,
    against 0.5 ms for the interior point after 50; larger data shrink their active rows as the epochs go on, so
    the epochs' cost at the look overstates the rest: 75,000 x 64 dense rows, 10 classes, 3.8 s -> 17.9 s with
    that switch) -- both estimated from the sizes alone (:func:`interior_seconds`,
    :func:`epoch_seconds`), so the same data give the same iterates; None where ``max_iter`` is at most LIBLINEAR's
    300 (the dual alone, as for the squared losses) or the switch is off.  ``deadline`` (``time.perf_counter()``
    seconds, from ``time_limit``): no switch whose estimate would run past it."""
    if not enabled or max_iter <= DUAL_EPOCHS:
        return None
    n, m = max(ld.n_samples, 1), ld.n_weights
    row_values = ld.n_features if ld.dense else ld.indptr[-1] / n
    stored = ld.Xd.nbytes if ld.dense else ld.data.nbytes + ld.indices.nbytes
    in_cache = stored <= l2_cache_bytes()
    every = look_every(ld)

    def worth(t, active, epochs, converging):
        if converging and not in_cache:
            return False
        active = n if active is None else max(int(active), 1)
        n_var, rank = per_row * active, min(active, m)
        if not fits(n_var, rank):
            return False
        cost = interior_seconds(n_var, rank)
        if deadline is not None and time.perf_counter() + cost > deadline:
            return False  # (the interior point does not look at the clock while it runs)
        return cost < epochs * epoch_seconds(active, row_values, in_cache)

    def stall(measure):
        return StallWatch(measure, max_iter, every=every, worth=worth)

    return stall


def _finish(
    first, solve_again, interior, violators, room, certify, every, tol, max_iter, time_limit, t0, verbose, accept=None
):
    """After the epochs ``first`` stalled: the interior point on the active rows (``first.active``; every row where
    None or at least :data:`ALL_FROM` of them), ``interior(rows, dual, w)`` -> (dual, w, steps) with the other
    rows' dual variables held (None: it failed).  Rows held outside that violate their optimality conditions by
    more than the epochs' ``tol`` would allow (``violators(dual, w, held)``: shrinking guessed them wrong) join,
    and the interior point runs again, at most :data:`ROUNDS` times while ``room(count)`` says they fit.  The
    result is the fit (``certify(dual, w)``: a converged :class:`~maxmargin.solvers.dual_cd.LinearFit` with the
    SVM's primal and dual objectives) where its duality gap is within :data:`GAP_ACCEPT` (``accept``, where given;
    or ``tol``, where smaller) of the primal objective:
    a bound on its distance from the optimum that holds at any scale of the columns, where the epochs' own test
    (LIBLINEAR's, on the projected gradient) is scale-bound and the epochs, started from such a point on unscaled
    columns, wander off it (breast cancer's regression: 101.95 at the interior point's result, 122.7 after one
    epoch).  Else the epochs again from the result (or from where they stopped, where the interior point failed)
    for the rest of ``max_iter``, over every row, watched: where they stall again they stop with status
    ``'stalled'``; where they end worse than at the stall, or the interior point failed, the epochs go on from the
    stall instead, unwatched, as they would have without the switch.  Where those epochs end above the interior
    point's own result, that result is the fit: status ``'stalled'`` where they missed ``tol`` (0/1 columns of value
    1,000: 78.3 against the epochs' 111.1), converged where they met it (until session 72 the epochs' fit).  Returns
    the fit of those epochs, its ``n_iter`` counting every epoch and Newton step."""
    n = first.dual.shape[0]
    rows = first.active if first.active is not None and first.active.shape[0] < ALL_FROM * n else np.arange(n)
    dual, w, steps = first.dual, first.w, 0
    for _ in range(ROUNDS):
        out = interior(rows, dual, w)
        steps += out[2]
        if out[0] is None:
            break
        dual, w = out[0], out[1]
        if rows.shape[0] == n:
            break
        held = np.ones(n, dtype=bool)
        held[rows] = False
        extra = np.flatnonzero(held)[violators(dual, w, held)]
        if verbose:
            print(
                f"[maxmargin] dual-cd: interior point on {rows.shape[0]} active rows; {extra.shape[0]} held rows join"
            )
        if extra.shape[0] == 0 or not room(rows.shape[0] + extra.shape[0]):
            break
        rows = np.union1d(rows, extra)
    if verbose:
        print(f"[maxmargin] dual-cd: stalled at epoch {first.n_iter}; interior point: {steps} Newton steps")
    found = None  # the interior point's result as a fit (its SVM objectives)
    if steps and dual is not first.dual:
        found = certify(dual, w)
        found.n_iter = int(first.n_iter) + int(steps)
        found.interior_steps = int(steps)
        found.interior_rows = int(rows.shape[0])
        if found.gap is not None and found.gap <= min(GAP_ACCEPT if accept is None else accept, tol) * abs(
            found.objective
        ):
            return found
    left = max(int(max_iter) - int(first.n_iter) - int(steps), 1)

    def watch(measure):  # the epochs after the interior point stop where they stall too (status 'stalled')
        return StallWatch(measure, left, every=every)

    fit = None
    if found is not None:
        fit = solve_again(dual, left, _remaining(time_limit, t0), watch)
        if not fit.objective <= first.objective:
            # the interior point's multipliers led to a worse primal point than the stalled epochs had reached
            if verbose:
                print("[maxmargin] dual-cd: the interior point's start did worse; the epochs go on from the stall")
            fit = None
    if fit is None:  # the epochs go on from the stall, unwatched, as without the switch
        fit = solve_again(first.dual, left, _remaining(time_limit, t0), None)
    fit.n_iter = int(first.n_iter) + int(steps) + int(fit.n_iter)
    fit.interior_steps = int(steps)
    fit.interior_rows = int(rows.shape[0])
    if found is not None and found.objective < fit.objective:
        # the epochs ended above the interior point's own result: that one -- converged where they met tol (a
        # violation rule, not the optimum: see dual_primal._dual_then_primal), else not certified
        if not fit.converged:
            found.status, found.converged = "stalled", False
        return found
    return fit


def _epochs(solve, start_name, dual_options, tol, verbose):
    """``dual(start, iters, limit, watch=None)``: ``solve`` (the dual solver with its data bound) for the L1 loss,
    from the dual variables ``start`` (the keyword ``start_name``; None: ``dual_options``' own), at most ``iters``
    epochs, time limit ``limit``, ``stall=watch``."""

    def dual(start, iters, limit, watch=None):
        opts = dict(dual_options, **{start_name: start}) if start is not None else dual_options
        return solve(squared=False, tol=tol, max_iter=iters, stall=watch, time_limit=limit, verbose=verbose, **opts)

    return dual


def _no_switch(fit):
    fit.interior_steps = 0
    fit.interior_rows = 0
    return fit


def l1_svc(ld, y, C, *, tol=0.1, max_iter=1000, stall=True, time_limit=None, verbose=False, **dual_options):
    r"""Hinge-loss classification (``y`` in {-1, +1}, ``C`` per row): :func:`~maxmargin.solvers.dual_cd.solve_svc`
    with ``squared=False``, then the interior point where it stalls (module docstring).  ``dual_options`` go to
    the dual solver (``alpha0``, ``seed``, ``callback``, ...).  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` with ``interior_steps`` and ``interior_rows`` set.

    On the active rows :math:`A` with the others' :math:`\alpha_I` held, the problem is the box QP of the module
    docstring with :math:`V_A` and the linear term :math:`V_A w_I - e`, :math:`w_I = w - V_A^T\alpha_A`."""
    t0 = time.perf_counter()
    C = np.asarray(C, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    watch = _watch(ld, 1, int(max_iter), stall, None if time_limit is None else t0 + float(time_limit))

    dual = _epochs(functools.partial(dual_cd.solve_svc, ld, y, C), "alpha0", dual_options, tol, verbose)
    first = dual(dual_options.pop("alpha0", None), int(max_iter), time_limit, watch)
    if first.status != "stalled":
        return _no_switch(first)

    def interior(rows, alpha, w):
        V = signed_rows(ld, rows, y[rows])
        w_held = w - V.T @ alpha[rows]
        a, steps = box_qp(reduced(V), V @ w_held - 1.0, C[rows])
        if a is None:
            return None, None, steps
        out = alpha.copy()
        out[rows] = a
        return out, w_held + V.T @ a, steps

    def violators(alpha, w, held):
        # projected gradient of G_i = y_i w.x_i - 1: min(G, 0) at 0, max(G, 0) at C_i, G between
        G = y[held] * all_dots(w, *ld.args())[held] - 1.0
        a, c = alpha[held], C[held]
        pg = np.where(a <= 0.0, np.minimum(G, 0.0), np.where(a >= c, np.maximum(G, 0.0), G))
        return np.abs(pg) > 0.5 * tol

    def room(count):
        return fits(count, min(count, ld.n_weights))

    def certify(alpha, w):
        primal = dual_cd.svc_primal(w, ld, y, C, False)
        fit = dual_cd.LinearFit(w, alpha, primal, float(alpha.sum() - 0.5 * w @ w), 0, np.nan, "converged")
        fit.violation = fit.gap / max(abs(primal), 1e-300)
        return fit

    return _finish(
        first, dual, interior, violators, room, certify, look_every(ld), tol, max_iter, time_limit, t0, verbose
    )


def l1_svr(ld, y, C, epsilon, *, tol=0.1, max_iter=1000, stall=True, time_limit=None, verbose=False, **dual_options):
    r"""Epsilon-insensitive regression: :func:`~maxmargin.solvers.dual_cd.solve_svr` with ``squared=False``, then
    the interior point on :math:`(\alpha^+, \alpha^-)` of the active rows where it stalls (module docstring; the
    held rows' :math:`w_I` enter the linear term as :math:`\pm X_A w_I`)."""
    t0 = time.perf_counter()
    y = np.asarray(y, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    watch = _watch(ld, 2, int(max_iter), stall, None if time_limit is None else t0 + float(time_limit))

    dual = _epochs(functools.partial(dual_cd.solve_svr, ld, y, C, epsilon), "beta0", dual_options, tol, verbose)
    first = dual(dual_options.pop("beta0", None), int(max_iter), time_limit, watch)
    if first.status != "stalled":
        return _no_switch(first)

    def interior(rows, beta, w):
        V = signed_rows(ld, rows, np.ones(rows.shape[0]))
        w_held = w - V.T @ beta[rows]
        f_held = V @ w_held
        R = reduced(V)
        V2 = np.concatenate([R, -R])  # (R; -R)(R; -R)^T = [[Q, -Q], [-Q, Q]]
        p = np.concatenate([epsilon - y[rows] + f_held, epsilon + y[rows] - f_held])
        U = np.concatenate([C[rows], C[rows]])
        a, steps = box_qp(V2, p, U)
        if a is None:
            return None, None, steps
        b = a[: rows.shape[0]] - a[rows.shape[0] :]
        out = beta.copy()
        out[rows] = b
        return out, w_held + V.T @ b, steps

    # the epochs stop when the violations' sum is within tol times its value at beta = 0: a held row joins where
    # its violation exceeds half that sum's share of a row
    limit = 0.5 * tol * float(np.maximum(np.abs(y) - epsilon, 0.0).sum()) / max(y.shape[0], 1)

    def violators(beta, w, held):
        # optimality of beta_i for r_i = y_i - w.x_i: |r_i| <= eps at 0, r_i >= eps at C_i, r_i <= -eps at -C_i
        r = y[held] - all_dots(w, *ld.args())[held]
        b, c = beta[held], C[held]
        v = np.where(b >= c, epsilon - r, np.where(b <= -c, r + epsilon, np.where(b == 0.0, np.abs(r) - epsilon, 0.0)))
        return v > limit

    def room(count):
        return fits(2 * count, min(count, ld.n_weights))

    def certify(beta, w):
        primal = dual_cd.svr_primal(w, ld, y, C, epsilon, False)
        dual_objective = float(y @ beta - epsilon * np.abs(beta).sum() - 0.5 * w @ w)
        fit = dual_cd.LinearFit(w, beta, primal, dual_objective, 0, np.nan, "converged")
        fit.violation = fit.gap / max(abs(primal), 1e-300)
        return fit

    return _finish(
        first, dual, interior, violators, room, certify, look_every(ld), tol, max_iter, time_limit, t0, verbose
    )
