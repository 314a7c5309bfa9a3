r"""Sequential minimal optimisation (SMO) for the standard dual problem.

Solves (see :mod:`maxmargin.problem`)

.. math::

    \min_\alpha f(\alpha) = \tfrac12 \alpha^T Q \alpha + p^T \alpha
    \quad\text{s.t.}\quad y^T\alpha = \Delta,\; 0 \le \alpha_i \le U_i

by the decomposition method of seed 001 (after Bottou & Lin): each step changes
two variables along the direction :math:`u = (y_i, -y_j)` that keeps
:math:`y^T\alpha` fixed, with the clipped Newton step :math:`\lambda^*`.

With :math:`G = \nabla f(\alpha) = Q\alpha + p` and

.. math::

    I_{up} = \{t : y_t = +1, \alpha_t < U_t\} \cup \{t : y_t = -1, \alpha_t > 0\},\quad
    I_{low} = \{t : y_t = +1, \alpha_t > 0\} \cup \{t : y_t = -1, \alpha_t < U_t\},

the *maximal violating pair* is :math:`i = \arg\max_{I_{up}} -y_t G_t`,
:math:`j = \arg\min_{I_{low}} -y_t G_t`.  The solver keeps :math:`i` and picks
:math:`j` by the second-order rule of Fan, Chen & Lin (2005, "WSS3"):
:math:`j = \arg\min_{t \in I_{low},\, -y_tG_t < -y_iG_i} -b_{it}^2 / a_{it}` with
:math:`a_{it} = K_{ii} + K_{tt} - 2K_{it}` (:math:`\tau = 10^{-12}` when
:math:`a_{it} \le 0`, so indefinite kernels still make progress) and
:math:`b_{it} = -y_iG_i + y_tG_t`.  It stops when the maximal KKT violation
:math:`m(\alpha) - M(\alpha) = \max_{I_{up}} -y_tG_t - \min_{I_{low}} -y_tG_t`
falls below ``tol`` (LIBSVM's criterion).

Shrinking (Joachims; LIBSVM) sets aside variables at a bound whose gradient
says they will stay there; their gradient is rebuilt from
:math:`\bar G_t = \sum_{j:\alpha_j = U_j} U_j Q_{tj}` before the solver stops.
Kernel rows come through a bounded LRU cache of ``cache_size`` MB.

The nu-variant (``problem.nu_constraints``; LIBSVM's ``Solver_NU``, for nu-SVC
and nu-SVR) keeps *two* equality constraints,
:math:`\sum_{y_t=+1}\alpha_t = s_+` and :math:`\sum_{y_t=-1}\alpha_t = s_-`
(the sums of the feasible start ``alpha0``).  A step may then only move two
variables of the same class, so the selection runs within each class
:math:`c \in \{+1, -1\}`: :math:`m_c = \max_{t \in I_{up}, y_t = c} -y_tG_t`
with its arg-max :math:`i_c`, and :math:`j` minimises :math:`-b_{i_ct}^2/a_{i_ct}`
over :math:`t \in I_{low}` with :math:`b_{i_ct} = m_{y_t} + y_tG_t > 0`; then
:math:`i = i_{y_j}`.  It stops when
:math:`\max_c (m_c - M_c) < \text{tol}` (each class's own violation).  Shrinking
uses the per-class bounds the same way.  At the end each class gives its own
offset :math:`r_c` (mean of :math:`G_t` over its free variables, else the middle of
the interval its bounded variables allow) and
:math:`\rho = (r_+ - r_-)/2`, :math:`r = (r_+ + r_-)/2` (``Solution.extra['r']``):
nu-SVC divides :math:`\alpha` and :math:`\rho` by :math:`r`; for nu-SVR
:math:`\varepsilon = -r`.

The hot loop is compiled with Numba; it runs in chunks so that Python can show
progress, call a callback and honour a time limit between chunks.

Around the loop (issue 4):

* the gradient at a nonzero start (warm starts, the feasible starts of nu-SVC,
  nu-SVR and one-class) is computed by kernel *blocks* (:func:`init_gradient`),
  not row by row;
* problems with several variables per data row (SVR: ``n_var > n_data``) always
  fetch whole kernel rows, as LIBSVM does;
* the active list is kept sorted after each shrinking step, so the loops walk
  every array forwards (about twice as fast on large problems);
* small dense problems run with single-threaded BLAS (:func:`_blas_limit`);
* a :class:`KernelRowPool` made current with :func:`kernel_row_pool` keeps
  kernel-row caches between runs on the same data (warm starts, the folds of the
  probability cross-validation).
"""

from __future__ import annotations

import contextlib
import time
import types

import numpy as np
import scipy.sparse as sp
from numba import njit, uint64

from .._threads import one_blas_thread
from ..kernels.formulas import FORMULA_CODES
from ..kernels.rowcache import (  # noqa: F401
    _POOL,
    PINNED,
    KernelRowPool,
    RowCache,
    _pool_key,
    get_row,
    given_gram,
    gram_data,
    gram_kept,
    gram_pays,
    keeping_gram,
    kernel_data,
    kernel_diag,
    kernel_row_pool,
    whole_gram_cache,
)
from .base import Solution, Watch

#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("dual", "nu-dual")
OPTIONS = ("tol", "max_iter", "shrinking", "cache_size", "callback", "callback_info", "time_limit", "verbose")
OWN_OPTIONS = ()
TRAITS = ("iterative", "libsvm-rho", "gathered-rows")

TAU = 1e-12
INF = np.inf


@njit(cache=True, inline="always")
def pair_step(opposite, ai, aj, Gi, Gj, Ci, Cj, quad):
    """The clipped Newton step on two variables along u = (y_i, -y_j) (seed 001's
    lambda*): the new (alpha_i, alpha_j), kept in [0, C_i] x [0, C_j] with
    y_i alpha_i + y_j alpha_j unchanged.  ``opposite`` is y_i != y_j; ``quad`` is
    Q_ii + Q_jj - 2 y_i y_j Q_ij (> 0)."""
    if opposite:
        delta = (-Gi - Gj) / quad
        diff = ai - aj
        ai += delta
        aj += delta
        if diff > 0.0:
            if aj < 0.0:
                aj = 0.0
                ai = diff
        else:
            if ai < 0.0:
                ai = 0.0
                aj = -diff
        if diff > Ci - Cj:
            if ai > Ci:
                ai = Ci
                aj = Ci - diff
        else:
            if aj > Cj:
                aj = Cj
                ai = Cj + diff
    else:
        delta = (Gi - Gj) / quad
        s = ai + aj
        ai -= delta
        aj += delta
        if s > Ci:
            if ai > Ci:
                ai = Ci
                aj = s - Ci
        else:
            if aj < 0.0:
                aj = 0.0
                ai = s
        if s > Cj:
            if aj > Cj:
                aj = Cj
                ai = s - Cj
        else:
            if ai < 0.0:
                ai = 0.0
                aj = s
    return ai, aj


@njit(cache=True)
def _select(kd, cache, sv, m, all_active, tol):
    """WSS3. Returns (i, j, violation); j = -1 when optimal to ``tol``."""
    kidx, y, p, U, QD, shift, alpha, G, Gbar, active, act_data, state, fstate = sv
    gmax = -INF
    gmax2 = -INF
    i = -1
    for k in range(m):
        t = active[k]
        u = uint64(t)  # an unsigned index: no negative-index wraparound test on each load
        if y[u] > 0:
            if alpha[u] < U[u]:
                v = -G[u]
                if v >= gmax:
                    gmax = v
                    i = t
        else:
            if alpha[u] > 0.0:
                v = G[u]
                if v >= gmax:
                    gmax = v
                    i = t
    if i == -1:
        return -1, -1, 0.0
    Ki = get_row(
        kd,
        cache,
        kidx[i],
        all_active,
        act_data,
        m,
    )
    QDi = QD[i]
    j = -1
    best = INF
    for k in range(m):
        t = active[k]
        u = uint64(t)  # an unsigned index: no negative-index wraparound test on each load
        if y[u] > 0:
            if alpha[u] > 0.0:
                v = G[u]
                if v > gmax2:
                    gmax2 = v
                b = gmax + v
                if b > 0.0:
                    a = QDi + QD[u] - 2.0 * Ki[uint64(kidx[u])]
                    if a <= 0.0:
                        a = TAU
                    obj = -(b * b) / a
                    if obj <= best:
                        best = obj
                        j = t
        else:
            if alpha[u] < U[u]:
                v = -G[u]
                if v > gmax2:
                    gmax2 = v
                b = gmax + v
                if b > 0.0:
                    a = QDi + QD[u] - 2.0 * Ki[uint64(kidx[u])]
                    if a <= 0.0:
                        a = TAU
                    obj = -(b * b) / a
                    if obj <= best:
                        best = obj
                        j = t
    viol = gmax + gmax2
    if viol < tol or j == -1:
        return i, -1, max(viol, 0.0)
    return i, j, viol


#: whether ``_run_py`` runs the nu-variant's selection; each compiled copy of it binds its own
#: (:func:`_with_selection`), a compile-time constant, so that a C-SVC fit compiles only the standard one
_NU = False


@njit(cache=True)
def _reconstruct(kd, cache, sv, m):
    """Rebuild the gradient of the inactive variables from G_bar and the free ones."""
    kidx, y, p, U, QD, shift, alpha, G, Gbar, active, act_data, state, fstate = sv
    n_var = y.shape[0]
    if m == n_var:
        return
    is_act = np.zeros(n_var, dtype=np.bool_)
    for k in range(m):
        is_act[active[k]] = True
    inactive = np.empty(n_var - m, dtype=np.int64)
    whole = m >= 0  # a run-time True: a literal True would compile get_row a second time
    q = 0
    for t in range(n_var):
        if not is_act[t]:
            inactive[q] = t
            q += 1
            G[t] = Gbar[t] + p[t]
    for k in range(m):
        j = active[k]
        if alpha[j] > 0.0 and alpha[j] < U[j]:
            Kj = get_row(
                kd,
                cache,
                kidx[j],
                whole,
                act_data,
                m,
            )
            c = y[j] * alpha[j]
            for r in range(inactive.shape[0]):
                u = uint64(inactive[r])
                G[u] += y[u] * c * Kj[uint64(kidx[u])]


@njit(cache=True)
def _shrink(kd, cache, sv, tol, nu):
    """LIBSVM's shrinking heuristic; unshrinks once near the end.

    Per class c: A_c = max{-G_t : y_t = c, alpha_t < U_t}, B_c = max{G_t : y_t = c,
    alpha_t > 0}.  The standard problem bounds with m = max(A_+, B_-) and
    M = max(B_+, A_-) for both classes; the nu-variant bounds each class by its own
    (A_c, B_c).  A variable at its upper bound with -G_t above its class's "up"
    bound, or at zero with G_t above its "low" bound, is set aside.
    """
    kidx, y, p, U, QD, shift, alpha, G, Gbar, active, act_data, state, fstate = sv
    n_var = y.shape[0]
    m = state[0]
    a_pos = -INF
    b_pos = -INF
    a_neg = -INF
    b_neg = -INF
    for k in range(m):
        t = active[k]
        if alpha[t] < U[t]:
            if y[t] > 0:
                if -G[t] > a_pos:
                    a_pos = -G[t]
            elif -G[t] > a_neg:
                a_neg = -G[t]
        if alpha[t] > 0.0:
            if y[t] > 0:
                if G[t] > b_pos:
                    b_pos = G[t]
            elif G[t] > b_neg:
                b_neg = G[t]
    if nu:
        up_pos, up_neg, low_pos, low_neg = a_pos, a_neg, b_pos, b_neg
        gap = max(a_pos + b_pos, a_neg + b_neg)
    else:
        gmax1 = max(a_pos, b_neg)
        gmax2 = max(b_pos, a_neg)
        up_pos, up_neg, low_pos, low_neg = gmax1, gmax2, gmax2, gmax1
        gap = gmax1 + gmax2
    if state[1] == 0 and gap <= tol * 10.0:
        state[1] = 1
        _reconstruct(kd, cache, sv, m)
        for t in range(n_var):
            active[t] = t
            act_data[t] = kidx[t]
        m = n_var
        cache[6][1] += 1  # the row cache's epoch: partial rows are stale once variables come back
    k = 0
    while k < m:
        t = active[k]
        shrink = False
        if alpha[t] >= U[t]:
            if y[t] > 0:
                shrink = -G[t] > up_pos
            else:
                shrink = -G[t] > up_neg
        elif alpha[t] <= 0.0:
            if y[t] > 0:
                shrink = G[t] > low_pos
            else:
                shrink = G[t] > low_neg
        if shrink:
            m -= 1
            active[k] = active[m]
            act_data[k] = act_data[m]
            active[m] = t
            act_data[m] = kidx[t]
        else:
            k += 1
    # keep the active list in increasing order: the loops over it then walk every array
    # forwards, which the memory prefetcher follows (swaps leave it scrambled).  A pass over a
    # mask (O(n_var), once per shrinking round) instead of np.sort, whose compiled quicksort
    # cost seconds of start-up; the set-aside tail active[m:] is not touched
    keep = np.zeros(n_var, dtype=np.bool_)
    for k in range(m):
        keep[active[k]] = True
    q = 0
    for t in range(n_var):
        if keep[t]:
            active[q] = t
            act_data[q] = kidx[t]
            q += 1
    state[0] = m


#: columns (support vectors) per kernel block when the starting gradient is computed
INIT_BLOCK_COLS = 2048
#: starting gradients that need at most this many kernel values (data rows x rows with nonzero coefficients)
#: take them as kernel rows through the row cache in one compiled call (:func:`_start_sums`), not as blocks.
#: Alone, a block is faster (120 x 60 values: 40 us against 113 us), but the compiled call releases the GIL
#: where a block's way through Python holds it, and the rows stay cached for SMO: rows / blocks in whole fits
#: (``/tmp/s19/abrows.py``) NuSVC on 20 classes of 250 rows (pairs on two threads) 0.87, wine 1.00, breast
#: cancer 1.00, one-class on wine 0.98
INIT_ROWS_MAX_VALUES = 1 << 15


@njit(cache=True, nogil=True)
def _start_sums(kd, cache, rows, coef, s):
    """``s[t, :] += K(x_t, x_r) coef[r, :]`` for every data row t and each data row r of ``rows``, the kernel
    rows whole through the row cache (:func:`get_row`)."""
    n = s.shape[0]
    no_list = np.zeros(1, dtype=np.int64)
    whole = n >= 0  # run-time True (a literal would compile get_row again)
    for r in rows:
        K = get_row(kd, cache, r, whole, no_list, 0)
        c0 = coef[r, 0]
        c1 = coef[r, 1]
        for t in range(n):
            s[t, 0] += c0 * K[t]
            s[t, 1] += c1 * K[t]


def init_gradient(problem, alpha, y, p, U, shift, kidx, cache=None, kd=None):
    r"""Gradient :math:`G = Q\alpha + p` and :math:`\bar G_t = \sum_{j:\alpha_j = U_j} U_jQ_{tj}` at
    the starting point, by kernel *blocks* (BLAS-3 matrix products of
    :meth:`maxmargin.kernels.Kernel.mmv`) between all data rows and the rows of the
    nonzero multipliers, never one kernel row at a time.

    With :math:`c_r = \sum_{j: k(j) = r} y_j\alpha_j` per data row :math:`r`:
    :math:`G_t = p_t + s_t\alpha_t + y_t\,(Kc)_{k(t)}`, and the same with
    :math:`U_j` over the bounded :math:`j` for :math:`\bar G` (plus :math:`U_ts_t` on its
    own diagonal).  Warm starts and the nonzero starts of nu-SVC, nu-SVR and
    one-class problems need this; a zero start costs nothing.  Where ``cache`` (a
    :class:`RowCache`) already holds every needed data row whole (the cross-validation
    folds of ``probability=True``), :math:`Kc` is taken from those rows instead; where few kernel values
    are needed (:data:`INIT_ROWS_MAX_VALUES`) and ``kd`` (the cache's :class:`KernelData`) is given, from
    kernel rows computed into the cache.
    """
    n_var = y.shape[0]
    G = p + shift * alpha
    Gbar = np.zeros(n_var)
    nz = alpha != 0
    if not nz.any():
        return G, Gbar
    at_up = alpha >= U
    n_data = problem.X.shape[0]
    coef = np.empty((n_data, 2))  # (np.bincount: the sums of np.add.at, in the same order, ~5x faster)
    coef[:, 0] = np.bincount(kidx[nz], weights=(y * alpha)[nz], minlength=n_data)
    coef[:, 1] = np.bincount(kidx[at_up], weights=(y * U)[at_up], minlength=n_data)
    rows = np.flatnonzero((coef[:, 0] != 0) | (coef[:, 1] != 0))
    kernel, X = problem.kernel, problem.X
    s = np.zeros((n_data, 2))
    slots = cache.slot_of[rows] if cache is not None else None
    if rows.size == 0:  # the coefficients cancel on every data row (SVR's two variables a row)
        pass
    elif slots is not None and np.all(slots >= 0) and np.all(cache.full[slots]):
        # K is symmetric: row r holds K(x_r, x_t) for every t.  The coefficients go to the slots
        # (zero elsewhere) so that the product reads the cache's leading slots as they are
        # (a view; gathering the rows first copied them: 50 MB for 774 rows of 8000)
        top = int(slots.max()) + 1
        cs = np.zeros((top, 2))
        cs[slots] = coef[rows]
        s = cache.rows[:top].T @ cs
    elif kernel.code == 4 and getattr(kernel, "name", "") != "callable":  # precomputed: X is the Gram matrix
        Xr = X[:, rows]
        s = np.asarray(Xr @ coef[rows])
    elif kd is not None and kernel.code in FORMULA_CODES and n_data * rows.size <= INIT_ROWS_MAX_VALUES:
        _start_sums(tuple(kd), cache.arrays(), rows, coef, s)
    else:
        for start in range(0, rows.shape[0], INIT_BLOCK_COLS):
            cols = rows[start : start + INIT_BLOCK_COLS]
            s += kernel.mmv(X, X[cols], coef[cols])
    G += y * s[kidx, 0]
    Gbar += y * s[kidx, 1]
    Gbar[at_up] += U[at_up] * shift[at_up]
    return G, Gbar


def _run_py(kd, cache, sv, tol, max_steps, shrinking, nu, full_rows):
    """Up to ``max_steps`` SMO steps. Returns 0 when optimal, 1 otherwise.

    ``nu`` selects the nu-variant (two equality constraints, pairs within a class).
    ``full_rows`` makes every kernel row whole even while variables are shrunk
    (LIBSVM's choice for SVR, where two variables share each data row: a partial
    row would list data rows twice, and whole rows stay valid across unshrinking).

    ``state`` = [active size, unshrunk flag, shrink counter, iterations];
    ``fstate[0]`` receives the current violation.

    The selection (WSS3 as :func:`_select`, or within each class for the nu-variant where the compile-time
    ``_NU`` says so) and the cache look-ups of its rows are written out here, on arrays unpacked once:
    a call that takes the data, cache and state tuples pays two atomic reference-count updates
    per array it unpacks (~150 ns a call, more than a whole step of a small problem; breast
    cancer unscaled, linear kernel: 1.25 us a step before, 0.13 us after, LIBSVM 0.15 us); a
    look-up that misses calls :func:`get_row`.
    """
    kidx, y, p, U, QD, shift, alpha, G, Gbar, active, act_data, state, fstate = sv
    rows, slot_of, row_of, stamp, full, epoch_of, counters = cache
    n_var = y.shape[0]
    # run-time True: a literal True argument would compile get_row a second time
    # (Numba specialises on Literal[bool]), which was a fifth of the first fit's start-up
    whole = n_var >= 0
    ident = n_var == rows.shape[1]  # variable t is data row t (C-SVC, one-class)?
    for t in range(n_var):
        if not ident:
            break
        ident = kidx[t] == t
    steps = 0
    while steps < max_steps:
        if shrinking:
            state[2] -= 1
            if state[2] <= 0:
                state[2] = min(n_var, 1000)
                _shrink(kd, cache, sv, tol, nu)
        m = state[0]
        all_active = full_rows or m == n_var
        if _NU:
            # WSS3 within each class: per class the maximal -y G over I_up (ip, jn), then
            # the second-order partner of either in its own class
            gmaxp = -INF
            gmaxn = -INF
            ip = -1
            jn = -1
            for k in range(m):
                u = uint64(active[k])
                if y[u] > 0:
                    if alpha[u] < U[u]:
                        v = -G[u]
                        if v >= gmaxp:
                            gmaxp = v
                            ip = active[k]
                elif alpha[u] > 0.0:
                    v = G[u]
                    if v >= gmaxn:
                        gmaxn = v
                        jn = active[k]
            Kp = QD  # never read unless ip >= 0
            Kn = QD
            if ip >= 0:
                r = kidx[ip]
                s = slot_of[r]
                if s >= 0 and (full[s] or (not all_active and epoch_of[s] == counters[1])):
                    counters[0] += 1
                    if stamp[s] < PINNED:
                        stamp[s] = counters[0]
                    counters[2] += 1
                    Kp = rows[s]
                else:
                    Kp = get_row(kd, cache, r, all_active, act_data, m)
            if jn >= 0:
                r = kidx[jn]
                s = slot_of[r]
                if s >= 0 and (full[s] or (not all_active and epoch_of[s] == counters[1])):
                    counters[0] += 1
                    if stamp[s] < PINNED:
                        stamp[s] = counters[0]
                    counters[2] += 1
                    Kn = rows[s]
                else:
                    Kn = get_row(kd, cache, r, all_active, act_data, m)
            gmaxp2 = -INF
            gmaxn2 = -INF
            j = -1
            best = INF
            for k in range(m):
                u = uint64(active[k])
                if y[u] > 0:
                    if alpha[u] <= 0.0:
                        continue
                    v = G[u]
                    if v > gmaxp2:
                        gmaxp2 = v
                    b = gmaxp + v
                    if ip >= 0 and b > 0.0:
                        a = QD[ip] + QD[u] - 2.0 * Kp[uint64(kidx[u])]
                        if a <= 0.0:
                            a = TAU
                        obj = -(b * b) / a
                        if obj <= best:
                            best = obj
                            j = active[k]
                else:
                    if alpha[u] >= U[u]:
                        continue
                    v = -G[u]
                    if v > gmaxn2:
                        gmaxn2 = v
                    b = gmaxn + v
                    if jn >= 0 and b > 0.0:
                        a = QD[jn] + QD[u] - 2.0 * Kn[uint64(kidx[u])]
                        if a <= 0.0:
                            a = TAU
                        obj = -(b * b) / a
                        if obj <= best:
                            best = obj
                            j = active[k]
            viol = max(gmaxp + gmaxp2, gmaxn + gmaxn2)
            have_i = False
            if viol < tol or j == -1:
                i = -1
                j = -1
                viol = max(viol, 0.0)
            else:
                # i's row is looked up again below: a hit that makes it the newest, so that
                # fetching j's row cannot evict it (with two slots, Kp or Kn is the oldest)
                i = ip if y[j] > 0 else jn
        else:
            # WSS3 as _select: i the maximal -y G over I_up, j the second-order choice over I_low
            gmax = -INF
            gmax2 = -INF
            i = -1
            for k in range(m):
                u = uint64(active[k])  # unsigned indices: no wraparound test on each load
                if y[u] > 0:
                    if alpha[u] < U[u]:
                        v = -G[u]
                        if v >= gmax:
                            gmax = v
                            i = active[k]
                elif alpha[u] > 0.0:
                    v = G[u]
                    if v >= gmax:
                        gmax = v
                        i = active[k]
            j = -1
            viol = 0.0
            have_i = i >= 0
            if have_i:
                r = kidx[i]
                s = slot_of[r]
                if s >= 0 and (full[s] or (not all_active and epoch_of[s] == counters[1])):
                    counters[0] += 1  # a hit, counted as get_row counts it
                    if stamp[s] < PINNED:
                        stamp[s] = counters[0]
                    counters[2] += 1
                    Ki = rows[s]
                else:
                    Ki = get_row(kd, cache, r, all_active, act_data, m)
                QDi = QD[i]
                best = INF
                for k in range(m):
                    u = uint64(active[k])
                    if y[u] > 0:
                        if alpha[u] <= 0.0:
                            continue
                        v = G[u]
                    else:
                        if alpha[u] >= U[u]:
                            continue
                        v = -G[u]
                    if v > gmax2:
                        gmax2 = v
                    b = gmax + v
                    if b > 0.0:
                        a = QDi + QD[u] - 2.0 * Ki[uint64(kidx[u])]
                        if a <= 0.0:
                            a = TAU
                        obj = -(b * b) / a
                        if obj <= best:
                            best = obj
                            j = active[k]
                viol = gmax + gmax2
                if viol < tol or j == -1:
                    j = -1
                    viol = max(viol, 0.0)
        fstate[0] = viol
        if j < 0:
            if m < n_var:
                _reconstruct(kd, cache, sv, m)
                for t in range(n_var):
                    active[t] = t
                    act_data[t] = kidx[t]
                m = n_var
                state[0] = m
                cache[6][1] += 1  # the row cache's epoch: partial rows are stale once variables come back
                # select again, over every variable, before the next shrink (the loop's top counts one down):
                # optimal there ends the run, else the step is taken and the step after it shrinks
                state[2] = 2
                continue
            return 0
        all_active = full_rows or m == n_var
        if not have_i:
            r = kidx[i]
            s = slot_of[r]
            if s >= 0 and (full[s] or (not all_active and epoch_of[s] == counters[1])):
                counters[0] += 1
                if stamp[s] < PINNED:
                    stamp[s] = counters[0]
                counters[2] += 1
                Ki = rows[s]
            else:
                Ki = get_row(kd, cache, r, all_active, act_data, m)
        r = kidx[j]
        s = slot_of[r]
        if s >= 0 and (full[s] or (not all_active and epoch_of[s] == counters[1])):
            counters[0] += 1
            if stamp[s] < PINNED:
                stamp[s] = counters[0]
            counters[2] += 1
            Kj = rows[s]
        else:
            Kj = get_row(kd, cache, r, all_active, act_data, m)
        Kij = Ki[kidx[j]]
        Ci = U[i]
        Cj = U[j]
        ai = alpha[i]
        aj = alpha[j]
        old_ai = ai
        old_aj = aj
        quad = QD[i] + QD[j] - 2.0 * Kij
        if quad <= 0.0:
            quad = TAU
        ai, aj = pair_step(y[i] != y[j], ai, aj, G[i], G[j], Ci, Cj, quad)
        alpha[i] = ai
        alpha[j] = aj
        dai = (ai - old_ai) * y[i]
        daj = (aj - old_aj) * y[j]
        if m == n_var and ident:  # every variable active, one a data row: a plain (vector) loop
            for t in range(n_var):
                G[t] += y[t] * (Ki[t] * dai + Kj[t] * daj)
        elif ident:  # shrunk: the active variables, each its own data row (one gather fewer)
            for k in range(m):
                u = uint64(active[k])  # unsigned indices: no wraparound test on each load
                G[u] += y[u] * (Ki[u] * dai + Kj[u] * daj)
        else:
            for k in range(m):
                u = uint64(active[k])
                kt = uint64(kidx[u])
                G[u] += y[u] * (Ki[kt] * dai + Kj[kt] * daj)
        G[i] += shift[i] * (ai - old_ai)
        G[j] += shift[j] * (aj - old_aj)
        if shrinking:
            for rr in range(2):
                v = i if rr == 0 else j
                old = old_ai if rr == 0 else old_aj
                new = ai if rr == 0 else aj
                was_up = old >= U[v]
                if was_up != (new >= U[v]):
                    Kv = get_row(
                        kd,
                        cache,
                        kidx[v],
                        whole,
                        act_data,
                        m,
                    )
                    c = U[v] * y[v]
                    if was_up:
                        c = -c
                    for t in range(n_var):
                        Gbar[t] += y[t] * c * Kv[uint64(kidx[t])]
                    Gbar[v] += (c * y[v]) * shift[v]
        state[3] += 1
        steps += 1
    return 1


def _with_selection(nu, suffix):
    """``_run_py`` compiled with ``_NU = nu`` (the nu-variant's selection or the standard one),
    cached under its own name: a C-SVC fit then compiles the standard selection only."""
    fn = types.FunctionType(_run_py.__code__, dict(globals(), _NU=nu), "_run" + suffix)
    fn.__qualname__ = "_run" + suffix
    fn.__doc__ = _run_py.__doc__
    fn.__module__ = __name__
    return njit(cache=True, nogil=True)(fn)


_run_standard = _with_selection(False, "_standard")
_run_two_sums = _with_selection(True, "_two_sums")


def _run(kd, cache, sv, tol, max_steps, shrinking, nu, full_rows):
    """Up to ``max_steps`` SMO steps (see ``_run_py``): the nu-variant's copy or the standard one."""
    run = _run_two_sums if nu else _run_standard
    return run(kd, cache, sv, tol, max_steps, shrinking, nu, full_rows)


@njit(cache=True, nogil=True)
def compute_rho(y, G, alpha, U):
    """Offset rho from the KKT conditions (LIBSVM's calculate_rho): the mean of
    ``y_t G_t`` over free variables, else the middle of the interval the bounded
    ones allow."""
    total = 0.0
    n_free = 0
    ub = np.inf
    lb = -np.inf
    for t in range(y.shape[0]):
        yg = y[t] * G[t]
        if alpha[t] >= U[t]:
            if y[t] < 0:
                ub = min(ub, yg)
            else:
                lb = max(lb, yg)
        elif alpha[t] <= 0.0:
            if y[t] > 0:
                ub = min(ub, yg)
            else:
                lb = max(lb, yg)
        else:
            total += yg
            n_free += 1
    if n_free > 0:
        return total / n_free
    if np.isfinite(ub) and np.isfinite(lb):
        return (ub + lb) / 2
    if np.isfinite(ub):
        return ub
    if np.isfinite(lb):
        return lb
    return 0.0


def _shift_mass(a, upper, mask, amount):
    """Add ``amount`` (may be negative) to ``sum(a[mask])`` within the box, or None if
    impossible.  Removing takes from each variable in proportion to its value (zeros
    stay zero); adding fills the nonzero variables first, in proportion to their room
    to the upper bound, and only then the zero ones, so a sparse start stays sparse."""
    if amount < 0:
        room = np.where(mask, a, 0.0)
        total = room.sum()
        if total < -amount * (1 - 1e-12):
            return None
        return np.maximum(a - room * min(1.0, -amount / total), 0.0)
    for sel in (mask & (a > 0), mask):
        room = np.where(sel, upper - a, 0.0)
        inf = np.isinf(room)
        if inf.any():
            return a + np.where(inf, amount / inf.sum(), 0.0)
        total = room.sum()
        if total >= amount * (1 - 1e-12):
            return np.minimum(a + room * min(1.0, amount / total), upper)
        if sel is mask:
            return None
        a = a + room  # the nonzero ones to their bounds, the rest from the zero ones
        amount -= total
    return None  # pragma: no cover


def initial_alpha(problem):
    r"""The starting point: zeros, or the problem's ``alpha0`` clipped into the box
    with its equality constraint(s) restored.

    Standard problem: after clipping, :math:`y^T\alpha = \Delta` is restored by
    taking the excess from the side that has too much (in proportion to the
    multipliers, so zeros stay zero), or, where that side cannot give it, by adding
    to the other side (see :func:`_shift_mass`).
    nu-variant: ``alpha0`` is required (its class sums :math:`s_\pm` *are* the two
    constraints); after clipping, each class sum is restored the same way within
    the class.
    """
    n = problem.n_var
    if problem.alpha0 is None:
        if problem.nu_constraints:
            raise ValueError(
                "a problem with nu_constraints needs a feasible alpha0 "
                "(its class sums are the two equality constraints)"
            )
        if problem.delta != 0:
            raise ValueError("a problem with delta != 0 needs a feasible alpha0")
        return np.zeros(n)
    a0 = np.asarray(problem.alpha0, dtype=np.float64)
    if a0.shape != (n,):
        raise ValueError(f"alpha0 has shape {a0.shape}, expected ({n},)")
    if not np.all(np.isfinite(a0)):
        raise ValueError("alpha0 must be finite")
    upper = np.asarray(problem.upper, dtype=np.float64)
    y = problem.y
    a = np.clip(a0, 0.0, upper)
    if problem.nu_constraints:
        for c in (1.0, -1.0):
            mask = y == c
            target = min(max(float(a0[mask].sum()), 0.0), float(upper[mask].sum()))
            r = target - a[mask].sum()
            if abs(r) > 1e-12 * max(1.0, target):
                a = _shift_mass(a, upper, mask, r)
                if a is None:
                    _fail_alpha0()
        return a
    r = problem.delta - y @ a
    if abs(r) > 1e-12 * max(1.0, np.abs(a).sum(), abs(problem.delta)):
        # prefer taking mass from the side in excess (keeps zeros at zero), else add to the other
        fixed = _shift_mass(a, upper, np.sign(r) * y < 0, -abs(r))
        if fixed is None:
            fixed = _shift_mass(a, upper, np.sign(r) * y > 0, abs(r))
        if fixed is None:
            return np.zeros(n) if problem.delta == 0 else _fail_alpha0()
        a = fixed
    return a


def _fail_alpha0():
    raise ValueError("the warm start alpha0 cannot be made feasible")


@njit(cache=True, nogil=True)
def compute_rho_nu(y, G, alpha, U):
    """Offsets of the nu-variant: per class c, r_c is the mean of ``G_t`` over its
    free variables, else the middle of [max G at the upper bound, min G at zero];
    returns ``(rho, r) = ((r_+ - r_-)/2, (r_+ + r_-)/2)`` (LIBSVM's Solver_NU).  Compiled: in NumPy, about
    twenty array operations (~50 us a call, twice a pair of a multi-class NuSVC)."""
    rs = np.zeros(2)
    for ci in range(2):
        c = 1.0 if ci == 0 else -1.0
        total = 0.0
        n_free = 0
        ub = np.inf  # min G at zero
        lb = -np.inf  # max G at the upper bound
        for t in range(y.shape[0]):
            if y[t] != c:
                continue
            up = alpha[t] >= U[t]
            low = alpha[t] <= 0.0
            if up:
                lb = max(lb, G[t])
            if low:
                ub = min(ub, G[t])
            if not up and not low:
                total += G[t]
                n_free += 1
        if n_free > 0:
            rs[ci] = total / n_free
        elif np.isfinite(ub) and np.isfinite(lb):
            rs[ci] = (ub + lb) / 2
        elif np.isfinite(ub):
            rs[ci] = ub
        elif np.isfinite(lb):
            rs[ci] = lb
    return (rs[0] - rs[1]) / 2, (rs[0] + rs[1]) / 2


class SolverState:
    """Arrays of one SMO run (kept between chunks)."""

    def __init__(self, problem, cache_size, gram=None):
        pool = getattr(_POOL, "pool", None)
        key = pool.key_of(problem, cache_size) if pool is not None else None
        found = pool.lookup(key) if key is not None else None
        n_data = problem.X.shape[0]
        if found is not None:
            self.kd, self.cache = found
            self.cache.counters[1] += 1  # a new run: partial rows of the last one are stale
        elif gram is not None:  # every row already in the cache: the matrix's diagonal is all SMO reads of kd
            self.kd = gram_data(gram.rows)
            self.cache = gram
        else:
            self.kd = kernel_data(problem.X, problem.kernel)
            self.cache = RowCache(n_data, cache_size)
            if key is not None:
                pool.store(key, self.kd, self.cache)
        self.counters0 = self.cache.counters.copy()
        # several variables per data row (SVR): serve whole rows only
        self.full_rows = problem.n_var > n_data
        self.kidx = np.ascontiguousarray(problem.index, dtype=np.int64)
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.p = np.ascontiguousarray(problem.p, dtype=np.float64)
        self.U = np.ascontiguousarray(problem.upper, dtype=np.float64)
        self.shift = np.ascontiguousarray(problem.shift, dtype=np.float64)
        kd = self.kd
        diag = kernel_diag(kd.code, kd.kp, kd.X, kd.data, kd.indices, kd.indptr, kd.sqn, kd.sparse, n_data)
        self.QD = diag[self.kidx] + self.shift
        n = self.y.shape[0]
        self.alpha = initial_alpha(problem)
        self.G = np.empty(n)
        self.Gbar = np.zeros(n)
        self.active = np.arange(n, dtype=np.int64)
        self.act_data = self.kidx.copy()
        self.state = np.array([n, 0, min(n, 1000), 0], dtype=np.int64)
        self.fstate = np.zeros(1)

    def arrays(self):
        """The solver state every compiled routine takes (after the kernel data and the
        row cache), as one tuple: unpacked at the top of each routine."""
        return (
            self.kidx,
            self.y,
            self.p,
            self.U,
            self.QD,
            self.shift,
            self.alpha,
            self.G,
            self.Gbar,
            self.active,
            self.act_data,
            self.state,
            self.fstate,
        )

    def kargs(self):
        """The two tuples every compiled routine takes first: the kernel data
        (:class:`maxmargin.kernels.rowcache.KernelData`) and the row cache's arrays."""
        return (tuple(self.kd), self.cache.arrays())


#: dense data with at most this many entries (n_rows * n_features) is solved with single-threaded
#: BLAS: each kernel row is one small matrix-vector product, and waking BLAS threads for it costs
#: more than it saves; on a busy machine a descheduled BLAS thread stalls every row by a
#: scheduler quantum (seen on usps: 1 s instead of 0.02 s per one-vs-one problem).
SINGLE_THREAD_MAX_ELEMENTS = 1 << 22


#: dense data whose largest product here (n x n x features) stays below this many multiply-adds needs no limit:
#: OpenBLAS runs products that small on one thread anyway, and setting and lifting the limit costs ~50 us, a
#: sixth of a fit on wine's pairs (the same bound as :data:`maxmargin.solvers.ovo.SMALL_WORK`)
NO_LIMIT_MAX_WORK = 1 << 18


def _blas_limit(problem):
    """A context that limits BLAS to one thread for small dense problems, else a no-op."""
    X = problem.X
    if sp.issparse(X) or X.shape[0] * max(X.shape[1], 1) > SINGLE_THREAD_MAX_ELEMENTS:
        return contextlib.nullcontext()
    if X.shape[0] * X.shape[0] * max(X.shape[1], 1) < NO_LIMIT_MAX_WORK:
        return contextlib.nullcontext()
    return one_blas_thread()


def solve(
    problem,
    tol=1e-3,
    max_iter=-1,
    shrinking=True,
    cache_size=200.0,
    callback=None,
    time_limit=None,
    verbose=False,
    callback_info=None,
    start=None,
):
    """Solve a :class:`~maxmargin.problem.DualProblem` by SMO (WSS3 + shrinking).

    Parameters
    ----------
    tol : float
        Stop when the maximal KKT violation is below ``tol``.
    max_iter : int
        Maximal number of SMO steps; -1 for no limit.
    shrinking : bool
        Use the shrinking heuristic.
    cache_size : float
        Kernel-row cache in MB.
    callback : callable or None
        Called between chunks of iterations with a dict (see the estimators);
        returning False stops the solver.
    time_limit : float or None
        Seconds; the solver stops (not converged) once exceeded.
    verbose : bool
        Print progress lines.
    callback_info : dict or None
        Extra keys merged into the dict the callback receives.
    start : tuple or None
        ``(G, Gbar)`` at the starting point ``problem.alpha0`` where the caller has them
        (:func:`init_gradient`'s values: the cross-validation folds compute theirs together,
        :meth:`maxmargin.probability.FoldRows.starts`); None computes them.
    """
    gram = _whole_gram(problem, cache_size)
    with contextlib.nullcontext() if gram is not None else _blas_limit(problem):
        return _solve(
            problem, tol, max_iter, shrinking, cache_size, callback, time_limit, verbose, callback_info, start, gram
        )


def _whole_gram(problem, cache_size):
    """The row cache of the whole kernel matrix (:func:`maxmargin.kernels.rowcache.gram_pays`), or None: only
    where the problem's variables use every row of its data and no pool of shared rows is open."""
    X, kernel = problem.X, problem.kernel
    if getattr(_POOL, "pool", None) is not None:
        return None
    given = given_gram(X, kernel)
    if not given and not gram_pays(X, kernel, X.shape[0], cache_size):
        return None
    if not np.bincount(np.asarray(problem.index, dtype=np.int64), minlength=X.shape[0]).all():
        return None
    if given:  # the matrix itself, every row pinned (no copy into a cache of rows)
        G = np.ascontiguousarray(X, dtype=np.float64)
        return RowCache.sharing(G, np.arange(G.shape[0], dtype=np.int64), range(0))
    return whole_gram_cache(X, kernel)


def _solve(
    problem, tol, max_iter, shrinking, cache_size, callback, time_limit, verbose, callback_info, start=None, gram=None
):
    nu = bool(problem.nu_constraints)
    st = SolverState(problem, cache_size, gram)
    ka = st.kargs()
    if start is None:
        st.G, st.Gbar = init_gradient(problem, st.alpha, st.y, st.p, st.U, st.shift, st.kidx, st.cache, st.kd)
    else:
        st.G = np.array(start[0], dtype=np.float64)
        st.Gbar = np.array(start[1], dtype=np.float64)
    st.sv = st.arrays()
    t0 = time.perf_counter()
    watch = Watch(callback, callback_info, time_limit, tol)
    chunk = 2000
    status = "max_iter"
    code = 1
    while True:
        steps = chunk
        if max_iter is not None and max_iter >= 0:
            steps = min(steps, max_iter - int(st.state[3]))
            if steps <= 0:
                break
        tc = time.perf_counter()
        code = _run(*ka, st.sv, float(tol), int(steps), bool(shrinking), nu, bool(st.full_rows))
        dt = time.perf_counter() - tc
        elapsed = time.perf_counter() - t0
        if code == 0:
            status = "converged"
            break
        # aim at ~0.2 s per chunk so progress and limits stay responsive
        if dt > 0:
            chunk = int(min(max(chunk * 0.2 / dt, 100), 1_000_000))
        if verbose:
            print(
                f"[smo] iter {int(st.state[3])}  violation {st.fstate[0]:.3e}  active {int(st.state[0])}  "
                f"{elapsed:.1f}s"
            )
        why = watch.check(
            st.state[3],
            lambda: 0.5 * st.alpha @ (st.G + st.p),
            st.fstate[0],
            alpha_sum=lambda: float(st.alpha.sum()),
        )
        if why is not None:
            status = why
            break
    m = int(st.state[0])
    if m < st.y.shape[0]:
        _reconstruct(*ka, st.sv, m)
    extra = {}
    if gram is not None and gram_kept():
        extra["gram"] = gram.rows
    if nu:
        rho, r = compute_rho_nu(st.y, st.G, st.alpha, st.U)
        extra["r"] = float(r)
    else:
        rho = compute_rho(st.y, st.G, st.alpha, st.U)
    objective = float(0.5 * st.alpha @ (st.G + st.p))
    if verbose:
        c = st.cache.counters - st.counters0
        print(
            f"[smo] {status}: iter {int(st.state[3])}, violation {st.fstate[0]:.3e}, objective {objective:.6g}, "
            f"rho {rho:.6g}, cache hits {int(c[2])} misses {int(c[3])}"
        )
    return Solution(
        alpha=st.alpha,
        rho=rho,
        objective=objective,
        n_iter=int(st.state[3]),
        violation=float(st.fstate[0]),
        converged=status == "converged",
        grad=st.G,
        status=status,
        extra=dict(
            extra,
            cache_hits=int(st.cache.counters[2] - st.counters0[2]),
            cache_misses=int(st.cache.counters[3] - st.counters0[3]),
        ),
    )
