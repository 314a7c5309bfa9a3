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

The hot loop is compiled with Numba; it runs in chunks so that Python can show
progress, call a callback and honour a time limit between chunks.
"""
from __future__ import annotations

import time

import numpy as np
from numba import njit

from ._kernel_rows import RowCache, get_row, kernel_data, kernel_diag
from .base import Solution

TAU = 1e-12
INF = np.inf


@njit(cache=True)
def _select(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
            rows, slot_of, row_of, stamp, full, epoch_of, counters,
            kidx, y, U, QD, alpha, G, active, act_data, m, all_active, tol):
    """WSS3. Returns (i, j, violation); j = -1 when optimal to ``tol``."""
    gmax = -INF
    gmax2 = -INF
    i = -1
    for k in range(m):
        t = active[k]
        if y[t] > 0:
            if alpha[t] < U[t]:
                v = -G[t]
                if v >= gmax:
                    gmax = v
                    i = t
        else:
            if alpha[t] > 0.0:
                v = G[t]
                if v >= gmax:
                    gmax = v
                    i = t
    if i == -1:
        return -1, -1, 0.0
    Ki = get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                 rows, slot_of, row_of, stamp, full, epoch_of, counters,
                 kidx[i], all_active, act_data, m)
    QDi = QD[i]
    j = -1
    best = INF
    for k in range(m):
        t = active[k]
        if y[t] > 0:
            if alpha[t] > 0.0:
                v = G[t]
                if v > gmax2:
                    gmax2 = v
                b = gmax + v
                if b > 0.0:
                    a = QDi + QD[t] - 2.0 * Ki[kidx[t]]
                    if a <= 0.0:
                        a = TAU
                    obj = -(b * b) / a
                    if obj <= best:
                        best = obj
                        j = t
        else:
            if alpha[t] < U[t]:
                v = -G[t]
                if v > gmax2:
                    gmax2 = v
                b = gmax + v
                if b > 0.0:
                    a = QDi + QD[t] - 2.0 * Ki[kidx[t]]
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


@njit(cache=True)
def _reconstruct(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                 rows, slot_of, row_of, stamp, full, epoch_of, counters,
                 kidx, y, p, U, alpha, G, Gbar, active, act_data, m):
    """Rebuild the gradient of the inactive variables from G_bar and the free ones."""
    n_var = y.shape[0]
    if m == n_var:
        return
    is_act = np.zeros(n_var, dtype=np.bool_)
    for k in range(m):
        is_act[active[k]] = True
    inactive = np.empty(n_var - m, dtype=np.int64)
    q = 0
    for t in range(n_var):
        if not is_act[t]:
            inactive[q] = t
            q += 1
            G[t] = Gbar[t] + p[t]
    for k in range(m):
        j = active[k]
        if alpha[j] > 0.0 and alpha[j] < U[j]:
            Kj = get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                         rows, slot_of, row_of, stamp, full, epoch_of, counters,
                         kidx[j], True, act_data, m)
            c = y[j] * alpha[j]
            for r in range(inactive.shape[0]):
                t = inactive[r]
                G[t] += y[t] * c * Kj[kidx[t]]


@njit(cache=True)
def _shrink(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
            rows, slot_of, row_of, stamp, full, epoch_of, counters,
            kidx, y, p, U, alpha, G, Gbar, active, act_data, state, tol):
    """LIBSVM's shrinking heuristic; unshrinks once near the end."""
    n_var = y.shape[0]
    m = state[0]
    gmax1 = -INF
    gmax2 = -INF
    for k in range(m):
        t = active[k]
        up = alpha[t] >= U[t]
        low = alpha[t] <= 0.0
        if y[t] > 0:
            if not up and -G[t] > gmax1:
                gmax1 = -G[t]
            if not low and G[t] > gmax2:
                gmax2 = G[t]
        else:
            if not up and -G[t] > gmax2:
                gmax2 = -G[t]
            if not low and G[t] > gmax1:
                gmax1 = G[t]
    if state[1] == 0 and gmax1 + gmax2 <= tol * 10.0:
        state[1] = 1
        _reconstruct(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                     rows, slot_of, row_of, stamp, full, epoch_of, counters,
                     kidx, y, p, U, alpha, G, Gbar, active, act_data, m)
        for t in range(n_var):
            active[t] = t
            act_data[t] = kidx[t]
        m = n_var
        counters[1] += 1
    k = 0
    while k < m:
        t = active[k]
        up = alpha[t] >= U[t]
        low = alpha[t] <= 0.0
        shrink = False
        if up:
            if y[t] > 0:
                shrink = -G[t] > gmax1
            else:
                shrink = -G[t] > gmax2
        elif low:
            if y[t] > 0:
                shrink = G[t] > gmax2
            else:
                shrink = G[t] > gmax1
        if shrink:
            m -= 1
            active[k] = active[m]
            act_data[k] = act_data[m]
            active[m] = t
            act_data[m] = kidx[t]
        else:
            k += 1
    state[0] = m


@njit(cache=True)
def _init_gradient(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                   rows, slot_of, row_of, stamp, full, epoch_of, counters,
                   kidx, y, p, U, shift, alpha, G, Gbar, act_data):
    n_var = y.shape[0]
    for t in range(n_var):
        G[t] = p[t] + shift[t] * alpha[t]
        Gbar[t] = 0.0
    for j in range(n_var):
        if alpha[j] != 0.0:
            Kj = get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                         rows, slot_of, row_of, stamp, full, epoch_of, counters,
                         kidx[j], True, act_data, n_var)
            c = y[j] * alpha[j]
            for t in range(n_var):
                G[t] += y[t] * c * Kj[kidx[t]]
            if alpha[j] >= U[j]:
                cu = y[j] * U[j]
                for t in range(n_var):
                    Gbar[t] += y[t] * cu * Kj[kidx[t]]
                Gbar[j] += U[j] * shift[j]


@njit(cache=True)
def _run(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
         rows, slot_of, row_of, stamp, full, epoch_of, counters,
         kidx, y, p, U, QD, shift, alpha, G, Gbar, active, act_data, state, fstate,
         tol, max_steps, shrinking):
    """Up to ``max_steps`` SMO steps. Returns 0 when optimal, 1 otherwise.

    ``state`` = [active size, unshrunk flag, shrink counter, iterations];
    ``fstate[0]`` receives the current violation.
    """
    n_var = y.shape[0]
    steps = 0
    while steps < max_steps:
        if shrinking:
            state[2] -= 1
            if state[2] <= 0:
                state[2] = min(n_var, 1000)
                _shrink(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                        rows, slot_of, row_of, stamp, full, epoch_of, counters,
                        kidx, y, p, U, alpha, G, Gbar, active, act_data, state, tol)
        m = state[0]
        i, j, viol = _select(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                             rows, slot_of, row_of, stamp, full, epoch_of, counters,
                             kidx, y, U, QD, alpha, G, active, act_data, m, m == n_var, tol)
        fstate[0] = viol
        if j < 0:
            if m < n_var:
                _reconstruct(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                             rows, slot_of, row_of, stamp, full, epoch_of, counters,
                             kidx, y, p, U, alpha, G, Gbar, active, act_data, m)
                for t in range(n_var):
                    active[t] = t
                    act_data[t] = kidx[t]
                m = n_var
                state[0] = m
                counters[1] += 1
                i, j, viol = _select(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                                     rows, slot_of, row_of, stamp, full, epoch_of, counters,
                                     kidx, y, U, QD, alpha, G, active, act_data, m, True, tol)
                fstate[0] = viol
                if j < 0:
                    return 0
                state[2] = 1
            else:
                return 0
        all_active = m == n_var
        Ki = get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                     rows, slot_of, row_of, stamp, full, epoch_of, counters,
                     kidx[i], all_active, act_data, m)
        Kj = get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                     rows, slot_of, row_of, stamp, full, epoch_of, counters,
                     kidx[j], all_active, act_data, m)
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
        if y[i] != y[j]:
            delta = (-G[i] - G[j]) / quad
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
            delta = (G[i] - G[j]) / quad
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
        alpha[i] = ai
        alpha[j] = aj
        dai = (ai - old_ai) * y[i]
        daj = (aj - old_aj) * y[j]
        for k in range(m):
            t = active[k]
            kt = kidx[t]
            G[t] += y[t] * (Ki[kt] * dai + Kj[kt] * daj)
        G[i] += shift[i] * (ai - old_ai)
        G[j] += shift[j] * (aj - old_aj)
        if shrinking:
            for r in range(2):
                v = i if r == 0 else j
                old = old_ai if r == 0 else old_aj
                new = ai if r == 0 else aj
                was_up = old >= U[v]
                if was_up != (new >= U[v]):
                    Kv = get_row(kd_code, kp, X, data, indices, indptr, sqn, sparse, work,
                                 rows, slot_of, row_of, stamp, full, epoch_of, counters,
                                 kidx[v], True, act_data, m)
                    c = U[v] * y[v]
                    if was_up:
                        c = -c
                    for t in range(n_var):
                        Gbar[t] += y[t] * c * Kv[kidx[t]]
                    Gbar[v] += (c * y[v]) * shift[v]
        state[3] += 1
        steps += 1
    return 1


def compute_rho(y, G, alpha, U):
    """Offset rho from the KKT conditions: the mean of ``y_t G_t`` over free
    variables, else the middle of the interval the bounded ones allow (LIBSVM)."""
    yG = y * G
    at_up = alpha >= U
    at_low = alpha <= 0
    free = ~at_up & ~at_low
    if free.any():
        return float(yG[free].mean())
    ub_mask = (at_up & (y < 0)) | (at_low & (y > 0))
    lb_mask = (at_up & (y > 0)) | (at_low & (y < 0))
    ub = yG[ub_mask].min() if ub_mask.any() else np.inf
    lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
    if np.isfinite(ub) and np.isfinite(lb):
        return float((ub + lb) / 2)
    if np.isfinite(ub):
        return float(ub)
    if np.isfinite(lb):
        return float(lb)
    return 0.0


def initial_alpha(problem):
    """Zeros, or the problem's warm start clipped into the box."""
    n = problem.n_var
    if problem.alpha0 is None:
        if problem.delta != 0:
            raise ValueError("a problem with delta != 0 needs a feasible alpha0")
        return np.zeros(n)
    a = np.clip(np.asarray(problem.alpha0, dtype=np.float64), 0.0, problem.upper)
    if a.shape != (n,):
        raise ValueError(f"alpha0 has shape {a.shape}, expected ({n},)")
    # restore y'a = delta after clipping by moving free mass on one side
    r = problem.delta - problem.y @ a
    if abs(r) > 1e-12 * max(1.0, np.abs(a).sum()):
        side = np.sign(r) * problem.y > 0
        room = np.where(side, problem.upper - a, 0.0)
        if room.sum() < abs(r):
            return np.zeros(n) if problem.delta == 0 else _fail_alpha0()
        a = a + np.where(side, room * (abs(r) / room.sum()), 0.0)
    return a


def _fail_alpha0():
    raise ValueError("the warm start alpha0 cannot be made feasible")


class SolverState:
    """Arrays of one SMO run (kept between chunks)."""

    def __init__(self, problem, cache_size):
        self.kd = kernel_data(problem.X, problem.kernel)
        n_data = problem.X.shape[0]
        self.cache = RowCache(n_data, cache_size)
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

    def kargs(self):
        kd = self.kd
        return (kd.code, kd.kp, kd.X, kd.data, kd.indices, kd.indptr, kd.sqn, kd.sparse, kd.work) + self.cache.arrays()


def solve(problem, tol=1e-3, max_iter=-1, shrinking=True, cache_size=200.0,
          callback=None, time_limit=None, verbose=False, callback_info=None):
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
    """
    if problem.nu_constraints:
        raise NotImplementedError("the nu-solver variant is not implemented yet")
    st = SolverState(problem, cache_size)
    ka = st.kargs()
    _init_gradient(*ka, st.kidx, st.y, st.p, st.U, st.shift, st.alpha, st.G, st.Gbar, st.act_data)
    t0 = time.perf_counter()
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
        code = _run(*ka, st.kidx, st.y, st.p, st.U, st.QD, st.shift, st.alpha, st.G, st.Gbar,
                    st.active, st.act_data, st.state, st.fstate, float(tol), int(steps), bool(shrinking))
        dt = time.perf_counter() - tc
        elapsed = time.perf_counter() - t0
        if code == 0:
            status = "converged"
            break
        # aim at ~0.2 s per chunk so progress and limits stay responsive
        if dt > 0:
            chunk = int(min(max(chunk * 0.2 / dt, 100), 1_000_000))
        if verbose:
            print(f"[smo] iter {int(st.state[3])}  violation {st.fstate[0]:.3e}  active {int(st.state[0])}  {elapsed:.1f}s")
        if callback is not None:
            info = {
                "iteration": int(st.state[3]),
                "objective": float(0.5 * st.alpha @ (st.G + st.p)),
                "violation": float(st.fstate[0]),
                "tol": float(tol),
                "elapsed": elapsed,
            }
            if callback_info:
                info.update(callback_info)
            if callback(info) is False:
                status = "callback"
                break
        if time_limit is not None and elapsed >= time_limit:
            status = "time_limit"
            break
    m = int(st.state[0])
    if m < st.y.shape[0]:
        _reconstruct(*ka, st.kidx, st.y, st.p, st.U, st.alpha, st.G, st.Gbar, st.active, st.act_data, m)
    rho = compute_rho(st.y, st.G, st.alpha, st.U)
    objective = float(0.5 * st.alpha @ (st.G + st.p))
    if verbose:
        c = st.cache.counters
        print(f"[smo] {status}: iter {int(st.state[3])}, violation {st.fstate[0]:.3e}, objective {objective:.6g}, "
              f"rho {rho:.6g}, cache hits {int(c[2])} misses {int(c[3])}")
    return Solution(
        alpha=st.alpha,
        rho=rho,
        objective=objective,
        n_iter=int(st.state[3]),
        violation=float(st.fstate[0]),
        converged=status == "converged",
        grad=st.G,
        status=status,
        extra={"cache_hits": int(st.cache.counters[2]), "cache_misses": int(st.cache.counters[3])},
    )
