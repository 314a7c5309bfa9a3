r"""Frank-Wolfe for the L2-SVM on the unit simplex (seed 000).

The problem (seed 000, eqs. (14), (20)-(22))
--------------------------------------------
With :math:`G = K \circ yy^T` (eq. 13) and per-sample :math:`C_i`,

.. math::

    \mu_* = \arg\min_{\mu \in \Delta^{n-1}} f(\mu) = \tfrac12 \mu^T H \mu,
    \qquad H = G + yy^T + \operatorname{diag}(1/C_i),
    \qquad \Delta^{n-1} = \{\mu \ge 0,\ 1^T\mu = 1\}

(:math:`f = -D`, eq. 21-22).  Then :math:`w = \Psi\mu` (6), :math:`b = -y^T\mu`
(7) and the classifier is :math:`\operatorname{sign}(\mu^T(k(x)\circ y) - b)`
(19): in the library's convention :math:`f(x) = \sum_j \mu_j y_j k(x_j, x) -
\rho` this is :math:`\rho = b = -y^T\mu`.  The primal this is the dual of is
seed 000's eq. (1) with the bias regularised, :math:`\min \tfrac12(\|w\|^2 +
b^2 + C\xi^T\xi) - \rho_m` s.t. :math:`y_i(w^T\varphi(x_i) - b) \ge \rho_m -
\xi_i` (the :math:`yy^T` term of (14) is the :math:`b^2/2` term; the functional
margin :math:`\rho_m = \mu^T H\mu` at the optimum).

The algorithm (seed 000, Algorithm 2 and Listing 3)
---------------------------------------------------
:math:`\nabla f(\mu) = H\mu` (24); the linear minimisation over the simplex is
attained at a vertex, :math:`e_i` with :math:`i = \arg\min_j (H\mu)_j` (26)-(27);
the update is :math:`\mu_{t+1} = \mu_t + \gamma_t (e_i - \mu_t)` (28).

``step='2/(t+2)'``
    :math:`\gamma_t = 2/(t+2)`, :math:`t = 0, 1, \dots`, from :math:`\mu_0 =
    1/n` (23): exactly Listing 3 (``fwL2SVM``), iterate for iterate.
``step='line-search'``
    Exact line search on the quadratic: :math:`\gamma = \min(1, g^T(\mu - e_i)
    / (e_i - \mu)^T H (e_i - \mu))`.
``step='away'``
    Away-step Frank-Wolfe (Lacoste-Julien & Jaggi 2015, Algorithm 1): the away
    vertex :math:`j = \arg\max_{\mu_j > 0} g_j`; when
    :math:`g_j - g^T\mu > g^T\mu - g_i` move along :math:`\mu - e_j` with
    :math:`\gamma \le \mu_j / (1 - \mu_j)` (a *drop step* removes :math:`j`).
``step='pairwise'``
    Pairwise Frank-Wolfe (same paper, Algorithm 2): move mass from :math:`j` to
    :math:`i` along :math:`e_i - e_j`, :math:`\gamma \le \mu_j`.

Both away-step variants converge linearly on this strongly convex problem.

Stopping: the Frank-Wolfe duality gap
:math:`\mathrm{gap}(\mu) = g^T\mu - \min_i g_i \ge f(\mu) - f(\mu_*)` is a
certificate.  The objective's scale shrinks like 1/n (:math:`f \ge
\min_i(1/C_i)/(2n)` and :math:`f(1/n) = 1^T H 1 / (2n^2)`), so the test is
*relative*: the solver stops when ``gap <= tol * f(mu)``, which guarantees
:math:`(f(\mu) - f_*)/f_* \le tol/(1 - tol)`.  ``Solution.gap`` is the absolute
gap (the certificate), ``Solution.violation`` the relative one, ``gap / f``.

Cost: one kernel *column* per iteration (two for a pairwise step, whose away
vertex is almost always cached).  The gradient is kept up to date by
:math:`g \leftarrow (1-\gamma) g + \gamma H_{:,i}`; columns come from
``kernel.rows(X, [i])`` through a small LRU cache of ``cache_size`` MB; nothing
n x n is formed.  The start :math:`\mu_0 = 1/n` of Listing 3 needs
:math:`H 1/n` once, computed in row blocks (``kernel.mmv``); the other steps
start from the best vertex, :math:`\arg\min_i H_{ii}`, which needs only the
kernel diagonal.  The O(n) per-iteration loops are compiled with Numba.  After
the loop the gradient is recomputed exactly from the support (in row blocks) so
that the reported gap is not affected by rounding drift.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..kernels.formulas import FORMULA_CODES, RBF, transform_rows
from ..kernels.objects import LinearKernel, PolynomialKernel, RBFKernel, SigmoidKernel
from .base import Solution, Watch

#: kernels whose rows come from the shared formula (a user subclass may override its block)
#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("simplex",)
OPTIONS = ("tol", "max_iter", "cache_size", "callback", "callback_info", "time_limit", "verbose")
OWN_OPTIONS = ("step", "start")
TRAITS = ("iterative",)

BUILTIN = (LinearKernel, PolynomialKernel, RBFKernel, SigmoidKernel)

STEPS = ("2/(t+2)", "line-search", "away", "pairwise")
#: iteration limit used when ``max_iter`` is None or -1
DEFAULT_MAX_ITER = 200_000
#: a CSR training matrix with at most this many entries is densified once for the kernel columns
DENSIFY_MAX_ELEMENTS = 16_000_000


@dataclass
class SimplexProblem:
    r"""The L2-SVM dual on the simplex: :math:`\min \tfrac12\mu^T H\mu`, :math:`\mu \in \Delta^{n-1}`.

    ``H_ij = y_i y_j (K(x_i, x_j) + 1) + delta_ij / C_i`` (seed 000, eq. 14).
    ``X`` and ``kernel`` as in :class:`maxmargin.problem.DualProblem`; ``C`` is
    the per-sample array.
    """

    X: object
    kernel: object
    y: np.ndarray
    C: np.ndarray

    def __post_init__(self):
        self.y = np.ascontiguousarray(self.y, dtype=np.float64)
        self.C = np.ascontiguousarray(np.broadcast_to(np.asarray(self.C, dtype=np.float64), self.y.shape))
        if np.any(self.C <= 0):
            raise ValueError("C must be positive for the l2-simplex formulation")

    @property
    def n_var(self) -> int:
        return self.y.shape[0]

    def kernel_diag(self) -> np.ndarray:
        return np.asarray(self.kernel.diag(self.X), dtype=np.float64)

    def h_diag(self) -> np.ndarray:
        return self.kernel_diag() + 1.0 + 1.0 / self.C

    def _row_data(self):
        """X as the kernel rows are computed from: a CSR matrix with few features is densified
        once (a BLAS matrix-vector product per column instead of a sparse product)."""
        Xr = getattr(self, "_Xr", None)
        if Xr is None:
            Xr = self.X
            if sp.issparse(Xr) and self.kernel.code != 4 and Xr.shape[0] * Xr.shape[1] <= DENSIFY_MAX_ELEMENTS:
                Xr = np.ascontiguousarray(Xr.toarray())
            self._Xr = Xr
        return Xr

    def kernel_row(self, i: int) -> np.ndarray:
        """Row i of K.  For dense data and the built-in kernels: one BLAS matrix-vector product
        ``X x_i`` and the kernel's scalar map (a row-times-matrix product is several times slower);
        otherwise ``kernel.rows``."""
        Xr = self._row_data()
        code = self.kernel.code
        if isinstance(Xr, np.ndarray) and code in FORMULA_CODES and isinstance(self.kernel, BUILTIN):
            d = np.ascontiguousarray((Xr @ Xr[i])[None, :], dtype=np.float64)
            if code != RBF:
                return transform_rows(d, code, self.kernel.params)[0]
            sq = getattr(self, "_sq", None)
            if sq is None:
                sq = self._sq = np.einsum("ij,ij->i", Xr, Xr)
            return transform_rows(d, code, self.kernel.params, sq[i : i + 1], sq)[0]
        return np.ascontiguousarray(self.kernel.rows(Xr, np.array([i], dtype=np.int64))[0], dtype=np.float64)

    def h_times(self, v, support=None) -> np.ndarray:
        """``H v`` in row blocks (only the columns in ``support`` when given)."""
        v = np.asarray(v, dtype=np.float64)
        if support is None:
            support = np.arange(self.n_var)
        support = np.asarray(support, dtype=np.int64)
        out = v / self.C
        if support.size == 0:
            return out
        c = self.y[support] * v[support]
        if self.kernel.code == 4:  # precomputed / callable: X is (or yields) the Gram matrix
            if self.kernel.name == "callable":
                Ks = self.kernel(self.X, self.X[support])
            else:
                Xd = self.X.toarray() if hasattr(self.X, "toarray") else np.asarray(self.X)
                Ks = Xd[:, support]
            kv = Ks @ c
        else:
            Xr = self._row_data()
            block = max(1, min(2048, 4_000_000 // max(support.size, 1)))  # blocks of at most 32 MB
            kv = self.kernel.mmv(Xr, Xr[support], c, block_rows=block)
        return out + self.y * (kv + c.sum())

    def q_matrix(self) -> np.ndarray:
        """The whole H (small problems and references only)."""
        K = self.kernel(self.X, self.X)
        H = (self.y[:, None] * self.y[None, :]) * (K + 1.0)
        H[np.diag_indices_from(H)] += 1.0 / self.C
        return H

    def objective(self, mu) -> float:
        mu = np.asarray(mu, dtype=np.float64)
        return float(0.5 * mu @ self.h_times(mu, np.flatnonzero(mu)))

    def rho(self, mu) -> float:
        """Offset in ``f(x) = sum_j mu_j y_j k(x_j, x) - rho``: rho = b = -y'mu (seed 000, eq. 7)."""
        return float(-(self.y @ mu))


# --------------------------------------------------------------- compiled loops
@njit(cache=True)
def _h_column(krow, y, i, inv_c_i, out):
    """Column i of H from row i of K: y_i y_j (K_ij + 1) + [i == j] / C_i."""
    yi = y[i]
    for j in range(y.shape[0]):
        out[j] = yi * y[j] * (krow[j] + 1.0)
    out[i] += inv_c_i


@njit(cache=True)
def _scan(mu, g):
    """(i_fw = argmin g, j_away = argmax_{mu>0} g, g'mu), first index on ties like np.argmin."""
    n = g.shape[0]
    i_fw = 0
    gmin = g[0]
    j_aw = -1
    gmax = -np.inf
    gmu = 0.0
    for k in range(n):
        gk = g[k]
        if gk < gmin:
            gmin = gk
            i_fw = k
        if mu[k] > 0.0:
            gmu += gk * mu[k]
            if gk > gmax:
                gmax = gk
                j_aw = k
    return i_fw, j_aw, gmu


@njit(cache=True)
def _fw_update(mu, g, hcol, i, gamma):
    """mu += gamma (e_i - mu); g += gamma (H_i - g) -- the arithmetic of Listing 3."""
    for k in range(mu.shape[0]):
        e = 1.0 if k == i else 0.0
        mu[k] += gamma * (e - mu[k])
        g[k] += gamma * (hcol[k] - g[k])


@njit(cache=True)
def _away_update(mu, g, hcol_j, j, gamma, drop):
    """mu += gamma (mu - e_j); g += gamma (g - H_j); a drop step zeroes mu_j exactly."""
    for k in range(mu.shape[0]):
        e = 1.0 if k == j else 0.0
        mu[k] += gamma * (mu[k] - e)
        g[k] += gamma * (g[k] - hcol_j[k])
    if drop:
        mu[j] = 0.0


@njit(cache=True)
def _pair_update(mu, g, hcol_i, hcol_j, i, j, gamma, drop):
    """mu += gamma (e_i - e_j); g += gamma (H_i - H_j)."""
    mu[i] += gamma
    if drop:
        mu[j] = 0.0
    else:
        mu[j] -= gamma
    for k in range(mu.shape[0]):
        g[k] += gamma * (hcol_i[k] - hcol_j[k])


class ColumnCache:
    """Least-recently-used cache of columns of H (one kernel row each)."""

    def __init__(self, problem: SimplexProblem, cache_size_mb: float = 200.0):
        self.problem = problem
        n = problem.n_var
        self.capacity = max(2, int(cache_size_mb * 2**20 // (8 * max(n, 1))))
        self._cols: OrderedDict[int, np.ndarray] = OrderedDict()
        self._inv_c = 1.0 / problem.C
        self.hits = 0
        self.misses = 0

    def get(self, i: int) -> np.ndarray:
        col = self._cols.get(i)
        if col is not None:
            self._cols.move_to_end(i)
            self.hits += 1
            return col
        self.misses += 1
        krow = self.problem.kernel_row(i)
        col = np.empty_like(krow)
        _h_column(krow, self.problem.y, i, self._inv_c[i], col)
        self._cols[i] = col
        if len(self._cols) > self.capacity:
            self._cols.popitem(last=False)
        return col


def _resolve_max_iter(max_iter):
    if max_iter is None or max_iter < 0:
        return DEFAULT_MAX_ITER
    return int(max_iter)


def _single_threaded_blas():
    """Context: BLAS on one thread (the per-column products are small; thread start-up and
    contention cost more than they bring)."""
    from .._threads import one_blas_thread

    return one_blas_thread()


def solve(
    problem: SimplexProblem,
    step="2/(t+2)",
    tol=1e-3,
    max_iter=None,
    start=None,
    cache_size=200.0,
    callback=None,
    time_limit=None,
    verbose=False,
    callback_info=None,
    chunk=1000,
):
    """Minimise ``1/2 mu'H mu`` over the unit simplex by Frank-Wolfe.

    Parameters
    ----------
    problem : SimplexProblem
    step : {'2/(t+2)', 'line-search', 'away', 'pairwise'}
        Step rule (see the module docstring).
    tol : float
        Stop when the Frank-Wolfe duality gap is ``<= tol * f(mu)`` (relative).
        ``tol=0`` runs exactly ``max_iter`` iterations (Listing 3's ``tmax``).
    max_iter : int or None
        Iteration limit; None or -1 means ``DEFAULT_MAX_ITER``.
    start : {'uniform', 'vertex'} or None
        ``'uniform'`` is mu = 1/n (Listing 3, eq. 23), the default for
        ``'2/(t+2)'``; ``'vertex'`` is e_k with k = argmin_i H_ii, the default
        for the other rules.
    cache_size : float
        MB for the LRU cache of columns of H.
    callback : callable or None
        Called every ``chunk`` iterations with a dict (``iteration``,
        ``objective``, ``violation`` (= gap / f), ``tol``, ``elapsed`` and the
        keys of ``callback_info``); returning False stops the solver.
    time_limit : float or None
        Seconds after which the solver stops (status ``'time_limit'``).
    """
    with _single_threaded_blas():
        return _solve(
            problem, step, tol, max_iter, start, cache_size, callback, time_limit, verbose, callback_info, chunk
        )


def _solve(problem, step, tol, max_iter, start, cache_size, callback, time_limit, verbose, callback_info, chunk):
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
    if start is None:
        start = "uniform" if step == "2/(t+2)" else "vertex"
    if start not in ("uniform", "vertex"):
        raise ValueError(f"start must be 'uniform' or 'vertex', got {start!r}")
    if tol is None or not tol >= 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")
    max_iter = _resolve_max_iter(max_iter)
    n = problem.n_var
    cache = ColumnCache(problem, cache_size)
    hdiag = problem.h_diag()
    if start == "uniform":
        mu = np.full(n, 1.0 / n)
        g = problem.h_times(mu)
    else:
        k = int(np.argmin(hdiag))
        mu = np.zeros(n)
        mu[k] = 1.0
        g = cache.get(k).copy()

    t0 = time.perf_counter()
    watch = Watch(callback, callback_info, time_limit, tol)
    status = "max_iter"
    t = 0
    gap = np.inf
    n_drop = 0
    while True:
        # one chunk of iterations
        stop_chunk = min(max_iter, t + chunk)
        done = False
        while t < stop_chunk:
            i, j, gmu = _scan(mu, g)
            gap = gmu - g[i]
            if gap <= tol * 0.5 * gmu:
                done = True
                break
            if step == "2/(t+2)":
                gamma = 2 / (t + 2)
                _fw_update(mu, g, cache.get(i), i, gamma)
            elif step == "line-search":
                hcol = cache.get(i)
                curv = hcol[i] - 2.0 * g[i] + gmu  # (e_i - mu)' H (e_i - mu)
                gamma = min(1.0, gap / curv) if curv > 0 else 1.0
                _fw_update(mu, g, hcol, i, gamma)
            elif step == "away":
                away_gap = g[j] - gmu
                if gap >= away_gap or mu[j] >= 1.0:
                    hcol = cache.get(i)
                    curv = hcol[i] - 2.0 * g[i] + gmu
                    gamma = min(1.0, gap / curv) if curv > 0 else 1.0
                    _fw_update(mu, g, hcol, i, gamma)
                else:
                    hcol = cache.get(j)
                    gmax = mu[j] / (1.0 - mu[j])
                    curv = gmu - 2.0 * g[j] + hcol[j]  # (mu - e_j)' H (mu - e_j)
                    gamma = min(gmax, away_gap / curv) if curv > 0 else gmax
                    drop = gamma >= gmax
                    n_drop += drop
                    _away_update(mu, g, hcol, j, gamma, drop)
            else:  # pairwise
                hi = cache.get(i)
                hj = cache.get(j)
                gmax = mu[j]
                curv = hi[i] + hj[j] - 2.0 * hi[j]  # (e_i - e_j)' H (e_i - e_j)
                slope = g[j] - g[i]
                gamma = min(gmax, slope / curv) if curv > 0 else gmax
                drop = gamma >= gmax
                n_drop += drop
                _pair_update(mu, g, hi, hj, i, j, gamma, drop)
            t += 1
        elapsed = time.perf_counter() - t0
        if done or t >= max_iter:
            # recompute the gradient exactly from the support; the gap is the certificate
            g = problem.h_times(mu, np.flatnonzero(mu))
            i, j, gmu = _scan(mu, g)
            gap = gmu - g[i]
            if gap <= tol * 0.5 * gmu * (1 + 1e-9):
                status = "converged"
                break
            if t >= max_iter:
                status = "max_iter"
                break
            continue  # rounding drift made the running gap look better than it is: go on
        if verbose:
            print(f"[frank-wolfe {step}] iter {t}  gap {gap:.3e}  objective {0.5 * gmu:.6g}  {elapsed:.1f}s")
        why = watch.check(t, 0.5 * gmu, gap / (0.5 * gmu))
        if why is not None:
            status = why
            break
    if status in ("callback", "time_limit"):
        g = problem.h_times(mu, np.flatnonzero(mu))
        i, j, gmu = _scan(mu, g)
        gap = gmu - g[i]
    objective = float(0.5 * (mu @ g))
    if verbose:
        print(
            f"[frank-wolfe {step}] {status}: iter {t}, gap {gap:.3e}, objective {objective:.8g}, "
            f"support {np.count_nonzero(mu)}"
        )
    return Solution(
        alpha=mu,
        rho=problem.rho(mu),
        objective=objective,
        n_iter=t,
        violation=float(gap / objective) if objective > 0 else float(gap),
        converged=status == "converged",
        grad=g,
        gap=float(gap),
        status=status,
        extra={
            "step": step,
            "start": start,
            "cache_hits": cache.hits,
            "cache_misses": cache.misses,
            "drop_steps": int(n_drop),
        },
    )
