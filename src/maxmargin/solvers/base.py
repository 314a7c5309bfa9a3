"""The contract every solver honours.

A solver is a function ``solve(problem, **options) -> Solution``.  ``problem`` is
a :class:`maxmargin.problem.DualProblem` (or, for the simplex and primal solvers,
the problem object their module documents); the returned :class:`Solution` holds
the dual variables and everything an estimator needs to build a model.
"""

from __future__ import annotations

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
