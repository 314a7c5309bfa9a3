"""From (formulation, solver) to a fitted binary subproblem.

``fit_binary`` is the one place where an estimator's ``formulation`` and
``solver`` parameters are turned into a problem and a solver call.  It returns
a :class:`BinaryFit`; the estimators build their models from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .problem import csvc_problem
from .solvers import smo

FORMULATIONS = ("l1", "hard", "l2")
SOLVERS = ("smo",)
#: valid (formulation, solver) pairs
VALID = {("l1", "smo"), ("hard", "smo"), ("l2", "smo")}


@dataclass
class BinaryFit:
    """One fitted binary subproblem, labels y in {+1, -1}.

    The decision function is ``f(x) = sum_i coef_i K(x_i, x) - rho`` with
    ``coef = alpha * y`` over the training rows (``alpha`` may be None for
    primal-only solvers, which then set ``w`` and ``rho`` for a linear kernel).
    """

    alpha: np.ndarray | None
    rho: float
    objective: float
    n_iter: int
    violation: float
    converged: bool
    status: str = "converged"
    gap: float | None = None
    w: np.ndarray | None = None
    extra: dict = field(default_factory=dict)


def check_pair(formulation, solver):
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if (formulation, solver) not in VALID:
        pairs = ", ".join(f"({f!r}, {s!r})" for f, s in sorted(VALID))
        raise ValueError(f"formulation={formulation!r} cannot be solved by solver={solver!r}; valid pairs: {pairs}")


def fit_binary(X, y, C, kernel, formulation="l1", solver="smo", **options):
    """Fit one binary problem.

    Parameters
    ----------
    X : training data (dense, CSR, or the Gram matrix for a precomputed kernel)
    y : ndarray of +1.0 / -1.0
    C : float or ndarray of per-sample C (C times sample and class weights)
    kernel : maxmargin.kernels.Kernel
    options : passed to the solver (tol, max_iter, shrinking, cache_size,
        callback, time_limit, verbose, alpha0)
    """
    check_pair(formulation, solver)
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), y.shape)
    if formulation == "l1":
        problem = csvc_problem(X, kernel, y, C)
    elif formulation == "hard":
        problem = csvc_problem(X, kernel, y, C, hard=True)
    else:  # l2: Q + I/C, alpha >= 0 (seed 002 eq. 23)
        problem = csvc_problem(X, kernel, y, C, shift=1.0 / C, hard=True)
    alpha0 = options.pop("alpha0", None)
    if alpha0 is not None:
        problem.alpha0 = np.asarray(alpha0, dtype=np.float64)
    sol = smo.solve(problem, **options)
    return BinaryFit(
        alpha=sol.alpha,
        rho=sol.rho,
        objective=sol.objective,
        n_iter=sol.n_iter,
        violation=sol.violation,
        converged=sol.converged,
        status=sol.status,
        gap=sol.gap,
    )
