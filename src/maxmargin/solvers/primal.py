r"""Primal QPs in (w, b, xi) for the linear kernel (seed 002, section 3).

The notebook solves the max-margin problems in the primal before it derives the
duals (``trainMaxMargin``, ``trainSoftMargin``).  Here each is one QP for
qpsolvers (Clarabel first), with :math:`f(x) = w\cdot x + b`:

``'hard'`` (eq. 7)
    :math:`\min \tfrac12 w\cdot w` s.t. :math:`y_i(w\cdot x_i + b) \ge 1`.
``'l1'`` (eq. 8)
    :math:`\min \tfrac12 w\cdot w + \sum_i C_i\xi_i` s.t.
    :math:`y_i(w\cdot x_i + b) \ge 1 - \xi_i`, :math:`\xi \ge 0`.
``'l2'`` (the 2-norm primal of section 4)
    :math:`\min \tfrac12 w\cdot w + \tfrac12\sum_i C_i\xi_i^2` s.t.
    :math:`y_i(w\cdot x_i + b) \ge 1 - \xi_i`.
``'l2-simplex'`` (seed 000, eq. 1 with the bias term its dual implies)
    :math:`\min \tfrac12(w\cdot w + \beta^2 + \sum_i C_i\xi_i^2) - \rho_m` s.t.
    :math:`y_i(w\cdot x_i - \beta) \ge \rho_m - \xi_i` (here :math:`b = -\beta`).

Scaling: eqs. (7)-(9) are written with :math:`w\cdot w`; the notebook's own
Lagrangians (section 4) use :math:`\tfrac12\|w\|^2`, and so does this module, so
that ``C`` means the same for the primal and the dual solvers (and LIBSVM).

The multipliers of the margin constraints are the dual variables
(:math:`w = \sum_i \alpha_i y_i x_i`, eqs. 16, 20, 22; :math:`\mu` of seed 000),
so the solution also carries ``alpha`` (cleaned like the dual QP's: see
:func:`maxmargin.solvers.qp.clean_alpha`) and the support vectors are known.
``objective`` is on the dual's scale, :math:`-P(w, b, \xi)`, equal to the
dual minimum at the optimum (strong duality, Theorem 2); ``extra`` holds the
primal value itself (``primal_objective``) and ``xi``.

Only an explicit feature space works here: the linear kernel.  The number of
rows is limited to :data:`MAX_PRIMAL_ROWS` (the constraint matrix is sparse,
so this is far more than the dual QP allows).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .base import Solution
from .qp import QPInfeasibleError, QPTooLargeError, run_qp

#: Largest number of training rows the primal QP accepts by default.
#: What this solver takes (read by :mod:`maxmargin.solvers.registry`): the kinds of problem,
#: the common options it reads (the others are ignored), its own options, and its traits.
PROBLEMS = ("primal-qp",)
OPTIONS = ("time_limit", "verbose")
OWN_OPTIONS = ("backend", "max_n", "sv_threshold")
TRAITS = ()

MAX_PRIMAL_ROWS = 20000
#: Largest number of non-zeros of the data matrix the primal QP accepts by default.
MAX_PRIMAL_NNZ = 20_000_000
PRIMAL_FORMULATIONS = ("hard", "l1", "l2", "l2-simplex")


@dataclass
class PrimalProblem:
    """Training data for a primal solver: rows ``X`` (dense or CSR), labels ``y`` in {+1, -1},
    per-sample ``C`` and the ``formulation``."""

    X: object
    y: np.ndarray
    C: np.ndarray
    formulation: str = "l1"

    def __post_init__(self):
        self.y = np.asarray(self.y, dtype=np.float64)
        self.C = np.ascontiguousarray(np.broadcast_to(np.asarray(self.C, dtype=np.float64), self.y.shape))

    @property
    def n(self):
        return self.y.shape[0]

    def scores(self, w, intercept):
        """``w . x_i + intercept`` for every row."""
        return np.asarray(self.X @ w).ravel() + intercept

    def objective(self, w, intercept):
        r"""The primal value ``P(w, b)`` with the slack at its optimum for (w, b).

        'l1': eq. (9) scaled: 1/2 w.w + sum C_i max(0, 1 - y_i f_i);
        'l2': 1/2 w.w + 1/2 sum C_i max(0, 1 - y_i f_i)^2;
        'hard': 1/2 w.w (inf when a constraint is violated);
        'zero-one': eq. (11) scaled: 1/2 w.w + sum C_i [y_i f_i < 0].
        """
        w = np.asarray(w, dtype=np.float64)
        m = self.y * self.scores(w, intercept)
        reg = 0.5 * float(w @ w)
        if self.formulation == "l1":
            return reg + float(self.C @ np.maximum(0.0, 1.0 - m))
        if self.formulation == "l2":
            return reg + 0.5 * float(self.C @ np.maximum(0.0, 1.0 - m) ** 2)
        if self.formulation == "hard":
            return reg if np.all(m >= 1.0 - 1e-9) else np.inf
        if self.formulation == "zero-one":
            return reg + float(self.C @ (m < 0))
        raise ValueError(f"no closed-form primal objective for formulation {self.formulation!r}")


@dataclass
class PrimalSolution(Solution):
    """A :class:`Solution` with the primal weights: ``f(x) = w . x + intercept`` (``rho = -intercept``)."""

    w: np.ndarray | None = None
    intercept: float = 0.0


def check_primal_size(X, max_n=MAX_PRIMAL_ROWS, max_nnz=MAX_PRIMAL_NNZ):
    n = X.shape[0]
    nnz = X.nnz if sp.issparse(X) else X.shape[0] * X.shape[1]
    if max_n is not None and n > max_n:
        raise QPTooLargeError(
            n,
            max_n,
            f"solver='primal-qp' accepts at most {max_n} training rows; this problem has {n}. "
            "Use solver='smo' or 'subgradient', or pass max_n=None to try anyway",
        )
    if max_nnz is not None and nnz > max_nnz:
        raise QPTooLargeError(
            nnz,
            max_nnz,
            f"solver='primal-qp' accepts a data matrix with at most {max_nnz} non-zeros; this one has {nnz}",
        )


def solve(
    problem: PrimalProblem,
    *,
    backend=None,
    max_n=MAX_PRIMAL_ROWS,
    sv_threshold=1e-8,
    verbose=False,
    time_limit=None,
    **ignored,
):
    """Solve the primal QP of ``problem.formulation`` (see the module docstring).

    Raises :class:`maxmargin.solvers.qp.QPInfeasibleError` for ``'hard'`` on
    data that is not linearly separable.  Options of the iterative solvers are
    accepted and ignored.
    """
    from .qp import clean_alpha

    t0 = time.perf_counter()
    form = problem.formulation
    if form not in PRIMAL_FORMULATIONS:
        raise ValueError(f"the primal QP covers formulations {PRIMAL_FORMULATIONS}, not {form!r}")
    X = problem.X
    check_primal_size(X, max_n)
    y, C = problem.y, problem.C
    n, d = X.shape
    Xs = sp.csr_matrix(X, dtype=np.float64)
    YX = sp.diags(y) @ Xs  # rows y_i x_i
    ycol = sp.csr_matrix(y.reshape(-1, 1))
    eye_n = sp.identity(n, format="csr")
    # variable layout z = [w (d), b (1), extra (1 for rho_m of l2-simplex), xi (n or 0)]
    if form == "hard":
        nz = d + 1
        P = sp.diags(np.r_[np.ones(d), 0.0])
        q = np.zeros(nz)
        G = sp.hstack([-YX, -ycol])  # -y_i (w.x_i + b) <= -1
        h = -np.ones(n)
        lb = None
    elif form == "l1":
        nz = d + 1 + n
        P = sp.diags(np.r_[np.ones(d), 0.0, np.zeros(n)])
        q = np.r_[np.zeros(d + 1), C]
        G = sp.hstack([-YX, -ycol, -eye_n])  # -y_i (w.x_i + b) - xi_i <= -1
        h = -np.ones(n)
        lb = np.r_[np.full(d + 1, -np.inf), np.zeros(n)]
    elif form == "l2":
        nz = d + 1 + n
        P = sp.diags(np.r_[np.ones(d), 0.0, C])
        q = np.zeros(nz)
        G = sp.hstack([-YX, -ycol, -eye_n])
        h = -np.ones(n)
        lb = None
    else:  # l2-simplex, z = [w, beta, rho_m, xi]
        nz = d + 2 + n
        P = sp.diags(np.r_[np.ones(d), 1.0, 0.0, C])
        q = np.r_[np.zeros(d + 1), -1.0, np.zeros(n)]
        ones = sp.csr_matrix(np.ones((n, 1)))
        G = sp.hstack([-YX, ycol, ones, -eye_n])  # -y_i (w.x_i - beta) + rho_m - xi_i <= 0
        h = np.zeros(n)
        lb = None
    if lb is not None:
        G = sp.vstack([G, sp.hstack([sp.csr_matrix((n, d + 1)), -eye_n])])
        h = np.r_[h, np.zeros(n)]
    x, _, z, info = run_qp(
        sp.csc_matrix(P), q, sp.csc_matrix(G), h, backend=backend, verbose=verbose, time_limit=time_limit
    )
    w = x[:d].copy()
    if form == "l2-simplex":
        beta, rho_m = float(x[d]), float(x[d + 1])
        intercept = -beta
        xi = x[d + 2 :].copy()
        primal = 0.5 * (w @ w + beta**2 + float(C @ (xi * xi))) - rho_m
        alpha = np.maximum(z[:n], 0.0)
        if alpha.sum() > 0:
            alpha /= alpha.sum()
        upper = np.full(n, np.inf)
        info["rho_m"] = rho_m
    else:
        intercept = float(x[d])
        xi = x[d + 1 :].copy() if form != "hard" else np.zeros(n)
        m = y * problem.scores(w, intercept)
        if form == "hard":
            primal = 0.5 * float(w @ w)
        elif form == "l1":
            xi = np.maximum(xi, 0.0)
            primal = 0.5 * float(w @ w) + float(C @ xi)
        else:
            primal = 0.5 * float(w @ w) + 0.5 * float(C @ (xi * xi))
        alpha = np.maximum(z[:n], 0.0)
        upper = C.copy() if form == "l1" else np.full(n, np.inf)
        info["min_functional_margin"] = float(m.min())
    # slack of each margin constraint: alpha_i > 0 only where it is 0 (complementarity);
    # as in qp.clean_alpha, the smaller of alpha_i and slack_i is the one that is zero
    if form == "l2-simplex":
        slack = y * (problem.scores(w, 0.0) - beta) - rho_m + xi
    else:
        slack = y * problem.scores(w, intercept) - 1.0 + xi
    alpha = np.minimum(alpha, upper)
    alpha[alpha < slack] = 0.0
    alpha = clean_alpha(alpha, upper, threshold=sv_threshold)
    if form == "l2-simplex" and alpha.sum() > 0:
        alpha /= alpha.sum()
    info.update(primal_objective=float(primal), xi=xi, time=time.perf_counter() - t0)
    return PrimalSolution(
        alpha=alpha,
        rho=-float(intercept),
        objective=-float(primal),
        n_iter=1,
        violation=0.0,
        converged=True,
        grad=None,
        gap=None,
        status="converged",
        extra=info,
        w=w,
        intercept=float(intercept),
    )


__all__ = ["PrimalProblem", "PrimalSolution", "solve", "QPInfeasibleError"]
