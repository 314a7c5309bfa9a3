r"""Subgradient descent on the unconstrained hinge-loss primal (seed 002, eq. 9).

.. math::

    \min_{w, b} P(w, b) = \tfrac12 w\cdot w + \sum_i C_i\,|1 - y_i(w\cdot x_i + b)|_+

(eq. 9 with the notebook's Lagrangian scaling, so that ``C`` means what it means
for the duals; see :mod:`maxmargin.solvers.primal`).  "This is a non-smooth
unconstrained convex optimization problem, which can be solved by using simple
sub-gradient descent procedures" (seed 002) -- this module is that procedure,
for the linear kernel.

Steps (Pegasos, Shalev-Shwartz et al. 2007/2011)
-------------------------------------------------
:math:`P` is 1-strongly convex in :math:`w`, so the step is :math:`\eta_t = 1/t`:

.. math::

    w_{t+1} = \Pi_R\Big(w_t - \eta_t \big(w_t - \sum_{i \in V_t} C_i y_i x_i\big)\Big),
    \qquad V_t = \{i : y_i(w_t\cdot x_i + b_t) < 1\},

with :math:`\Pi_R` the projection on the ball of radius
:math:`R = \sqrt{2 P(0, b_0)} \ge \|w_*\|`.  With ``batch_size=k`` the sum runs
over k random rows scaled by n/k (stochastic Pegasos); by default it is the
full batch (deterministic).

The bias is not regularised, so it gets no Pegasos step: for a fixed :math:`w`,
:math:`b \mapsto P(w, b)` is convex and piecewise linear, and its exact
minimiser is found by sorting the kinks :math:`b = y_i - w\cdot x_i`
(:func:`best_intercept`); the method is then subgradient descent on the convex
function :math:`\phi(w) = \min_b P(w, b)`.

Averaging: the reported point is the polynomial-decay average
:math:`\bar w_t = (1 - \frac{4}{t+3})\bar w_{t-1} + \frac{4}{t+3} w_t`
(Shamir & Zhang 2013), which keeps the :math:`O(1/t)` rate of strongly convex
problems, or the last iterate if that is better (``averaging=False``: the best
iterate seen).

Stopping: subgradient methods have no cheap certificate.  Every
``check_every`` iterations the objective of the averaged point (with its exact
bias) is evaluated.  At the :math:`O(1/t)` rate the change of that value between
iteration :math:`t/2` and :math:`t` estimates the remaining error
:math:`P_t - P_*`, so the solver stops when
:math:`\max_{t/2 \le s \le t} |P_s - P_t|/P_t \le` ``tol`` (after at least ``min_iter``
iterations), or after ``max_iter``.  ``Solution.violation`` is that relative
change.  The point returned is the best one evaluated.  This is an estimate, not a bound: the tests
check the result against
the QP's optimum.  The
solution has no dual variables (``alpha`` is None); ``w``, ``intercept`` and
``rho = -intercept`` define it, and ``extra['support']`` lists the points with
:math:`y_i f(x_i) \le 1` (the ones that would be support vectors).
"""

from __future__ import annotations

import time

import numpy as np

from .base import Watch
from .primal import PrimalProblem, PrimalSolution

#: iteration limit used when ``max_iter`` is None or -1
#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("hinge",)
OPTIONS = ("tol", "max_iter", "callback", "callback_info", "time_limit", "verbose")
OWN_OPTIONS = ("batch_size", "averaging", "random_state", "check_every", "min_iter")
TRAITS = ("iterative",)

DEFAULT_MAX_ITER = 20_000


def best_intercept(m, y, c, return_kink=False):
    r"""Exact :math:`\arg\min_b \sum_i c_i |1 - y_i(m_i + b)|_+` (``m_i = w . x_i``).

    Each term is convex piecewise linear with its kink at :math:`t_i = y_i - m_i`;
    the slope of the sum is :math:`-\sum_{y_i=+1} c_i` left of every kink and grows
    by :math:`c_i` at each kink, so the minimum is at the first kink where it
    becomes non-negative.  With ``return_kink`` the index of that kink's point is
    returned too.
    """
    t = y - m
    order = np.argsort(t, kind="stable")
    s_plus = float(c[y > 0].sum())
    cum = np.cumsum(c[order])
    k = int(np.searchsorted(cum, s_plus * (1 - 1e-12), side="left"))
    k = min(k, t.shape[0] - 1)
    if return_kink:
        return float(t[order[k]]), int(order[k])
    return float(t[order[k]])


def hinge_weights(m, b, y, c, kink):
    r"""Weights :math:`\theta_i c_i` of a subgradient of :math:`\phi(w) = \min_b P(w, b)`.

    :math:`\theta_i = 1` for the margin violators :math:`y_i(m_i + b) < 1`, 0 for
    the others, and for the point on the kink the :math:`\theta \in [0, 1]` that
    makes the :math:`b`-component :math:`-\sum_i \theta_i c_i y_i` zero, so that
    the :math:`w`-component is a subgradient of :math:`\phi` (partial minimisation).
    """
    theta = (y * (m + b) < 1.0).astype(np.float64)
    theta[kink] = 0.0
    s = float((theta * c) @ y)
    if c[kink] > 0:
        theta[kink] = min(1.0, max(0.0, -s / (c[kink] * y[kink])))
    return theta * c


def _objective(problem, m, b):
    """P(w, b) minus the 1/2 w.w term, from the scores m = X w."""
    return float(problem.C @ np.maximum(0.0, 1.0 - problem.y * (m + b)))


def solve(
    problem: PrimalProblem,
    *,
    max_iter=None,
    tol=1e-6,
    batch_size=None,
    averaging=True,
    random_state=0,
    check_every=10,
    min_iter=100,
    callback=None,
    time_limit=None,
    verbose=False,
    callback_info=None,
    **ignored,
):
    """Pegasos-style subgradient descent on eq. (9); see the module docstring.

    Parameters
    ----------
    max_iter : int or None
        Iteration limit; None or -1 means ``DEFAULT_MAX_ITER``.
    tol : float
        Relative decrease of the best objective between iterations t/2 and t
        below which the solver stops (an estimate of the relative error).
    batch_size : int or None
        Rows per stochastic step (None: all rows, deterministic).
    averaging : bool
        Report the polynomial-decay average (True) or the best iterate.
    random_state : int
        Seed of the row sampling (stochastic steps only).
    """
    if problem.formulation != "l1":
        raise ValueError("the subgradient solver minimises the hinge loss (formulation 'l1') only")
    if max_iter is None or max_iter < 0:
        max_iter = DEFAULT_MAX_ITER
    X, y, C = problem.X, problem.y, problem.C
    n, d = X.shape
    cy = C * y
    rng = np.random.default_rng(random_state)
    t0 = time.perf_counter()
    watch = Watch(callback, callback_info, time_limit, tol)

    w = np.zeros(d)
    b = best_intercept(np.zeros(n), y, C)
    p0 = _objective(problem, np.zeros(n), b)
    radius = np.sqrt(2.0 * p0)
    w_avg = w.copy()
    best = (p0, w.copy(), b)
    history_t = [0]
    history = [p0]
    status = "max_iter"
    rel_impr = np.inf
    t = 0
    for t in range(1, max_iter + 1):
        if batch_size is None or batch_size >= n:
            m = np.asarray(X @ w).ravel()
            b, kink = best_intercept(m, y, C, return_kink=True)
            sub = np.asarray(X.T @ (y * hinge_weights(m, b, y, C, kink))).ravel()
        else:
            rows = rng.choice(n, size=int(batch_size), replace=False)
            Xb = X[rows]
            mb = np.asarray(Xb @ w).ravel()
            viol = (y[rows] * (mb + b) < 1.0).astype(np.float64)
            sub = (n / batch_size) * np.asarray(Xb.T @ (cy[rows] * viol)).ravel()
        eta = 1.0 / t
        w = (1.0 - eta) * w + eta * sub
        nw = float(np.sqrt(w @ w))
        if nw > radius:
            w *= radius / nw
        rate = 4.0 / (t + 3.0)
        w_avg = (1.0 - rate) * w_avg + rate * w
        if t % check_every == 0 or t == max_iter:
            cands = [w_avg, w] if averaging else [w]
            tracked = None
            for cand in cands:
                mc = np.asarray(X @ cand).ravel()
                bc = best_intercept(mc, y, C)
                pc = 0.5 * float(cand @ cand) + _objective(problem, mc, bc)
                if tracked is None:
                    tracked = pc
                if pc < best[0]:
                    best = (pc, cand.copy(), bc)
            if batch_size is not None and batch_size < n:
                b = best_intercept(np.asarray(X @ w).ravel(), y, C)
            history_t.append(t)
            history.append(tracked)
            since_half = history[max(0, int(np.searchsorted(history_t, t // 2, side="right")) - 1) :]
            rel_impr = max(abs(v - tracked) for v in since_half) / max(abs(tracked), 1e-300)
            if t >= min_iter and rel_impr <= tol:
                status = "converged"
                break
            elapsed = time.perf_counter() - t0
            if verbose and t % (100 * check_every) == 0:
                print(f"[subgradient] iter {t}  objective {best[0]:.8g}  improvement {rel_impr:.2e}  {elapsed:.1f}s")
            why = watch.check(t, best[0], rel_impr)
            if why is not None:
                status = why
                break
    p_best, w_best, b_best = best
    margins = y * (np.asarray(X @ w_best).ravel() + b_best)
    if verbose:
        print(f"[subgradient] {status}: iter {t}, objective {p_best:.8g}")
    return PrimalSolution(
        alpha=None,
        rho=-b_best,
        objective=-p_best,
        n_iter=t,
        violation=float(rel_impr),
        converged=status == "converged",
        grad=None,
        gap=None,
        status=status,
        extra={
            "primal_objective": p_best,
            "support": np.flatnonzero(margins <= 1.0 + 1e-9),
            "time": time.perf_counter() - t0,
        },
        w=w_best,
        intercept=b_best,
    )
