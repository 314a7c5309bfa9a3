"""The contract every solver honours.

A solver is a function ``solve(problem, **options) -> Solution``.  ``problem`` is
a :class:`maxmargin.problem.DualProblem` (or, for the simplex and primal solvers,
the problem object their module documents); the returned :class:`Solution` holds
the dual variables and everything an estimator needs to build a model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Solution:
    """What a solver leaves behind.

    Attributes
    ----------
    alpha : ndarray of shape (n_var,)
        Dual variables.
    rho : float
        Offset: the decision function is ``f(x) = sum_i alpha_i y_i K(x_i, x) - rho``
        (LIBSVM's convention, so ``intercept = -rho``).
    objective : float
        Dual objective ``1/2 alpha^T Q alpha + p^T alpha`` (a minimum).
    n_iter : int
        Iterations of the solver's main loop.
    violation : float
        The stopping measure when the solver stopped: the maximal KKT violation
        ``max_{I_up} -y_i G_i - min_{I_low} -y_i G_i`` for SMO-type solvers, the
        duality gap for Frank-Wolfe.
    converged : bool
        Whether the stopping criterion was met (False after ``max_iter``, a time
        limit or a callback stop).
    grad : ndarray or None
        Gradient ``Q alpha + p`` of the dual objective at ``alpha``.
    gap : float or None
        A duality gap where the solver computes one.
    status : str
        ``'converged'``, ``'max_iter'``, ``'time_limit'`` or ``'callback'``.
    extra : dict
        Solver-specific information (for example ``r`` of the nu-solver).
    """

    alpha: np.ndarray
    rho: float
    objective: float
    n_iter: int
    violation: float
    converged: bool
    grad: np.ndarray | None = None
    gap: float | None = None
    status: str = "converged"
    extra: dict = field(default_factory=dict)


class Watch:
    """What every iterative solver does between two chunks of its work: the callback
    (one dict per chunk, the contract of ``docs/CONTRACTS.md``) and the time limit.

    ``check(iteration, objective, violation, **more)`` returns None to go on, or the
    status that stops the solver: ``'callback'`` (the callback returned False) or
    ``'time_limit'``.  ``objective`` may be a function of no arguments: it is computed
    only when a callback reads it (an O(n) product for the dual solvers).
    """

    def __init__(self, callback=None, callback_info=None, time_limit=None, tol=0.0):
        self.callback = callback
        self.callback_info = callback_info
        self.time_limit = time_limit
        self.tol = float(tol)
        self.t0 = time.perf_counter()

    def elapsed(self):
        return time.perf_counter() - self.t0

    def check(self, iteration, objective, violation, **more):
        elapsed = self.elapsed()
        if self.callback is not None:
            info = {
                "iteration": int(iteration),
                "objective": float(objective() if callable(objective) else objective),
                "violation": float(violation),
                "tol": self.tol,
                "elapsed": elapsed,
            }
            info.update({k: (v() if callable(v) else v) for k, v in more.items()})
            if self.callback_info:
                info.update(self.callback_info)
            if self.callback(info) is False:
                return "callback"
        if self.time_limit is not None and elapsed >= self.time_limit:
            return "time_limit"
        return None
