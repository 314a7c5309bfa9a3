r"""The dual problems handed to a real QP library (the documents' way).

Seeds 002-004 solve the SVM duals with an off-the-shelf QP solver (Mathematica's
``FindMinimum[..., Method -> "QuadraticProgramming"]``, cvxopt).  This module
does the same through `qpsolvers <https://qpsolvers.github.io/qpsolvers/>`_,
with Clarabel (an interior-point solver) first and OSQP, then cvxopt, as
fallbacks.  It is the *reference* every other solver of maxmargin is checked
against, and it is exact to the QP library's tolerances (1e-10 here).

Problems
--------
:class:`maxmargin.problem.DualProblem`
    :math:`\min \tfrac12\alpha^TQ\alpha + p^T\alpha` s.t. :math:`y^T\alpha =
    \Delta`, :math:`0 \le \alpha \le U` (``U = inf`` allowed: hard margin eq. 17,
    2-norm eq. 23; finite: 1-norm eq. 21).  With ``nu_constraints`` the two
    per-class sums of ``alpha0`` are held instead.
:class:`maxmargin.solvers.frank_wolfe.SimplexProblem`
    :math:`\min \tfrac12\mu^TH\mu` s.t. :math:`1^T\mu = 1`, :math:`\mu \ge 0`
    (seed 000, eq. 22).

The whole ``Q`` (``H``) is formed, so the problem size is limited:
:data:`MAX_QP_VARIABLES` (3000) variables, a 72 MB matrix; above that
:class:`QPTooLargeError` says so instead of exhausting memory (``max_n``
overrides it).

Cleaning and offset
-------------------
An interior-point method never puts a variable exactly on a bound.  Like the
notebook (``alpha[[Position[# < 10^-8]]] = 0``), values below
``sv_threshold * max(1, max alpha)`` are set to 0 and values within the same
relative distance of a finite upper bound are set to it, so that the support
vectors are exactly the ``alpha > 0``.

The offset ``rho`` returned (``f(x) = sum alpha_i y_i K(x_i, x) - rho``) is the
weighted KKT average

.. math:: \rho = \frac{\sum_i w_i\, y_i G_i}{\sum_i w_i},\qquad
          w_i = \alpha_i \text{ if } U_i = \infty, \quad
          w_i = \alpha_i (U_i - \alpha_i)/U_i \text{ otherwise},

with :math:`G = Q\alpha + p`.  For the hard margin and the 2-norm soft margin this
is *exactly* the notebook's :math:`b = -\tilde\alpha^T H\alpha / 1^T\alpha`
(seed 002, eqs. 17 and 23, :math:`\rho = -b`); for the 1-norm soft margin it is
the notebook's own derivation done with the weights it multiplies by
(:math:`\alpha_i r_i`, :math:`r_i = C - \alpha_i`, eq. 20), i.e. an average
over the free support vectors, where the KKT conditions make every term equal.
Without free variables it falls back to LIBSVM's midpoint.  For the simplex
problem :math:`\rho = -y^T\mu` (seed 000, eq. 7).  The multiplier of the
equality constraint, which is the same number at the optimum, is kept in
``extra['eq_multiplier']``.

Failures
--------
An unbounded dual (the hard margin on data that no hyperplane in feature space
separates) raises :class:`QPUnboundedError`; an infeasible one
:class:`QPInfeasibleError`; any other failure of every backend
:class:`QPError`.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp

from .base import Solution

#: Largest number of dual variables the QP solver accepts by default (Q is dense).
#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("dual", "nu-dual", "simplex")
OPTIONS = ("time_limit", "verbose")
OWN_OPTIONS = ("backend", "max_n", "sv_threshold")
TRAITS = ()

MAX_QP_VARIABLES = 3000
#: Backends tried in order.
BACKENDS = ("clarabel", "osqp", "cvxopt")
#: Relative threshold under which alpha is set to 0 (and above which to its bound).
SV_THRESHOLD = 1e-8


class QPError(RuntimeError):
    """The QP library could not solve the problem."""


class QPUnboundedError(QPError):
    """The (dual) QP is unbounded below."""


class QPInfeasibleError(QPError):
    """The QP has no feasible point."""


class QPTooLargeError(ValueError):
    """The problem is larger than the QP path allows; ``n`` and ``limit`` say by how much."""

    def __init__(self, n, limit, message):
        super().__init__(message)
        self.n, self.limit = n, limit


def check_size(n_var, max_n=MAX_QP_VARIABLES, what="dual variables"):
    if max_n is not None and n_var > max_n:
        raise QPTooLargeError(
            n_var,
            max_n,
            f"solver='qp' forms the whole {n_var} x {n_var} matrix of the dual ({8 * n_var**2 / 2**20:.0f} MB) "
            f"and accepts at most {max_n} {what}; this problem has {n_var}. Use solver='smo' "
            "(or 'frank-wolfe' for l2-simplex), or pass max_n=None to try anyway",
        )


def _backend_options(name):
    if name == "clarabel":
        return dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
    if name == "osqp":
        return dict(eps_abs=1e-10, eps_rel=1e-10, max_iter=200_000, polish=True)
    if name == "cvxopt":
        return dict(abstol=1e-11, reltol=1e-11, feastol=1e-11, maxiters=200)
    return {}


def run_qp(P, q, G=None, h=None, A=None, b=None, lb=None, ub=None, backend=None, verbose=False, time_limit=None):
    """Solve one QP with the first backend that succeeds.

    Returns ``(x, eq_multipliers, ineq_multipliers, info)``.  Raises
    :class:`QPUnboundedError` / :class:`QPInfeasibleError` when the backend
    proves the problem unbounded / infeasible.
    """
    import qpsolvers

    problem = qpsolvers.Problem(P, q, G, h, A, b, lb, ub)
    names = BACKENDS if backend is None else (backend,)
    available = set(qpsolvers.available_solvers)
    errors = []
    for name in names:
        if name not in available:
            errors.append(f"{name}: not installed")
            continue
        opts = _backend_options(name)
        if name == "clarabel" and time_limit is not None:
            opts["time_limit"] = float(time_limit)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sol = qpsolvers.solve_problem(problem, solver=name, verbose=verbose, **opts)
        except Exception as exc:  # a backend crash: try the next one
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        status = str(sol.extras.get("status", "")) if getattr(sol, "extras", None) else ""
        if name == "clarabel":
            if "DualInfeasible" in status:
                raise QPUnboundedError(f"the QP is unbounded below (Clarabel: {status})")
            if "PrimalInfeasible" in status:
                raise QPInfeasibleError(f"the QP is infeasible (Clarabel: {status})")
        found = bool(sol.found) or (name == "clarabel" and status == "AlmostSolved")
        if not found or sol.x is None or not np.all(np.isfinite(sol.x)):
            low = status.lower()
            if "dual_infeasible" in low or "dual infeasible" in low:
                raise QPUnboundedError(f"the QP is unbounded below ({name}: {status})")
            if "primal_infeasible" in low or "primal infeasible" in low:
                raise QPInfeasibleError(f"the QP is infeasible ({name}: {status})")
            errors.append(f"{name}: status {status or 'not found'}")
            continue
        info = {"backend": name, "backend_status": status or "solved", "solve_time": time.perf_counter() - t0}
        y_eq = np.asarray(sol.y, dtype=np.float64) if sol.y is not None else np.empty(0)
        z = np.asarray(sol.z, dtype=np.float64) if sol.z is not None else np.empty(0)
        return np.asarray(sol.x, dtype=np.float64), y_eq, z, info
    raise QPError("no QP backend solved the problem: " + "; ".join(errors))


def clean_alpha(alpha, upper, y=None, grad=None, threshold=SV_THRESHOLD):
    """Put interior-point values that belong on a bound exactly on it.

    First an absolute rule: ``alpha_i < threshold * max(1, max alpha)`` -> 0 and
    ``U_i - alpha_i < threshold * max(1, U_i)`` -> ``U_i``.  Then, when the
    gradient is given, the complementarity rule of active-set identification:
    with the reduced gradient ``r_i = G_i - y_i rho`` (zero for a free variable,
    ``>= 0`` at the lower bound, ``<= 0`` at the upper bound), ``alpha_i < r_i``
    -> 0 and ``U_i - alpha_i < -r_i`` -> ``U_i`` (on the central path
    ``alpha_i r_i`` is of the order of the barrier parameter, so the smaller of
    the two is the one that is really zero).
    """
    a = np.asarray(alpha, dtype=np.float64).copy()
    upper = np.asarray(upper, dtype=np.float64)
    scale = max(1.0, float(np.max(a, initial=0.0)))
    a[a < threshold * scale] = 0.0
    fin = np.isfinite(upper)
    U = np.where(fin, upper, np.inf)
    near = fin & (a > U - threshold * np.where(fin, np.maximum(U, 1.0), 1.0))
    a[near] = U[near]
    if grad is not None and y is not None:
        rho = weighted_rho(y, grad, a, upper)
        r = grad - y * rho
        a[(a > 0) & (a < r)] = 0.0
        to_up = fin & (a < U) & ((U - a) < -r)
        a[to_up] = U[to_up]
    return a


def weighted_rho(y, G, alpha, upper):
    """The weighted KKT offset of the module docstring (LIBSVM's midpoint without free variables)."""
    fin = np.isfinite(upper)
    w = np.where(fin, alpha * (np.where(fin, upper, 1.0) - alpha) / np.where(fin, upper, 1.0), alpha)
    w = np.where(alpha > 0, np.maximum(w, 0.0), 0.0)
    yG = y * G
    if w.sum() > 0:
        return float(w @ yG / w.sum())
    at_up = fin & (alpha >= np.where(fin, upper, np.inf))
    at_low = alpha <= 0
    ub_mask = (at_up & (y < 0)) | (at_low & (y > 0))
    lb_mask = (at_up & (y > 0)) | (at_low & (y < 0))
    ub = yG[ub_mask].min() if ub_mask.any() else np.inf
    lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
    if np.isfinite(ub) and np.isfinite(lb):
        return float((ub + lb) / 2)
    return float(ub) if np.isfinite(ub) else (float(lb) if np.isfinite(lb) else 0.0)


def max_violation(y, G, alpha, upper):
    """LIBSVM's maximal KKT violation ``max_{I_up} -yG - min_{I_low} -yG`` (0 if a set is empty)."""
    up = ((y > 0) & (alpha < upper)) | ((y < 0) & (alpha > 0))
    low = ((y > 0) & (alpha > 0)) | ((y < 0) & (alpha < upper))
    if not up.any() or not low.any():
        return 0.0
    v = -y * G
    return float(max(0.0, v[up].max() - v[low].min()))


def solve(
    problem,
    *,
    backend=None,
    max_n=MAX_QP_VARIABLES,
    sv_threshold=SV_THRESHOLD,
    verbose=False,
    time_limit=None,
    **ignored,
):
    """Solve a :class:`~maxmargin.problem.DualProblem` or a
    :class:`~maxmargin.solvers.frank_wolfe.SimplexProblem` with a QP library.

    Parameters
    ----------
    backend : {'clarabel', 'osqp', 'cvxopt'} or None
        None tries them in this order.
    max_n : int or None
        Refuse problems with more variables (None: no limit).
    sv_threshold : float
        See "Cleaning" in the module docstring.
    ignored : the options of the iterative solvers (``tol``, ``max_iter``,
        ``shrinking``, ``cache_size``, ``callback``, ...) have no meaning here
        and are accepted and ignored, so one set of estimator options serves
        every solver.
    """
    from .frank_wolfe import SimplexProblem

    t0 = time.perf_counter()
    n = problem.n_var
    check_size(n, max_n)
    if isinstance(problem, SimplexProblem):
        Q = problem.q_matrix()
        p = np.zeros(n)
        A = sp.csc_matrix(np.ones((1, n)))
        b = np.array([1.0])
        upper = np.full(n, np.inf)
    else:
        Q = problem.q_matrix()
        p = np.asarray(problem.p, dtype=np.float64)
        y = problem.y
        if problem.nu_constraints:
            if problem.alpha0 is None:
                raise ValueError("a problem with nu_constraints needs alpha0 (it fixes the two per-class sums)")
            a0 = np.asarray(problem.alpha0, dtype=np.float64)
            A = sp.csc_matrix(np.vstack([(y > 0), (y < 0)]).astype(np.float64))
            b = np.array([a0[y > 0].sum(), a0[y < 0].sum()])
        else:
            A = sp.csc_matrix(y.reshape(1, -1).astype(np.float64))
            b = np.array([float(problem.delta)])
        upper = np.asarray(problem.upper, dtype=np.float64)
    Q = 0.5 * (Q + Q.T)
    lb = np.zeros(n)
    ub = None
    G_in = h_in = None
    fin = np.isfinite(upper)
    if fin.all():
        ub = upper.copy()
    elif fin.any():  # mixed: only the finite bounds become rows
        idx = np.flatnonzero(fin)
        G_in = sp.csc_matrix((np.ones(idx.size), (np.arange(idx.size), idx)), shape=(idx.size, n))
        h_in = upper[idx]
    x, y_eq, _, info = run_qp(
        sp.csc_matrix(Q), p, G_in, h_in, A, b, lb, ub, backend=backend, verbose=verbose, time_limit=time_limit
    )
    if isinstance(problem, SimplexProblem):
        mu = np.maximum(x, 0.0)
        scale = float(mu.max(initial=0.0))
        mu[mu < sv_threshold * scale] = 0.0
        g0 = Q @ mu
        r = g0 - (mu @ g0) / mu.sum()  # reduced gradient: 0 on the support at the optimum
        mu[mu < r] = 0.0
        mu /= mu.sum()
        grad = Q @ mu
        gap = float(mu @ grad - grad.min())
        objective = float(0.5 * mu @ grad)
        alpha, rho, violation = mu, problem.rho(mu), gap / objective if objective > 0 else gap
    else:
        raw = np.clip(x, 0.0, upper)
        if problem.nu_constraints:  # two offsets: only the absolute rule applies
            alpha = clean_alpha(raw, upper, threshold=sv_threshold)
        else:
            alpha = clean_alpha(raw, upper, problem.y, Q @ raw + p, sv_threshold)
        grad = Q @ alpha + p
        objective = float(0.5 * alpha @ (Q @ alpha) + p @ alpha)
        rho = weighted_rho(problem.y, grad, alpha, upper)
        violation = max_violation(problem.y, grad, alpha, upper)
        gap = None
    info["eq_multiplier"] = y_eq.tolist()
    info["time"] = time.perf_counter() - t0
    return Solution(
        alpha=alpha,
        rho=float(rho),
        objective=objective,
        n_iter=1,
        violation=float(violation),
        converged=True,
        grad=grad,
        gap=gap,
        status="converged",
        extra=info,
    )
