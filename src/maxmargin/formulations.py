r"""From (formulation, solver) to a fitted binary subproblem.

``fit_binary`` is the one place where an estimator's ``formulation`` and
``solver`` parameters are turned into a problem and a solver call.  It returns
a :class:`BinaryFit`; the estimators build their models from it.

Formulations (seed 002 unless said otherwise; labels :math:`y_i \in \{\pm1\}`,
per-sample :math:`C_i`)
-------------------------------------------------------------------------------
``'l1'`` (default)
    1-norm soft margin, hinge loss: primal eq. (8) / (9), dual eq. (21):
    :math:`\min \tfrac12\alpha^TQ\alpha - 1^T\alpha`, :math:`y^T\alpha = 0`,
    :math:`0 \le \alpha_i \le C_i` (also seed 001).
``'hard'``
    Hard margin: primal eq. (7), dual eq. (17), :math:`\alpha \ge 0`, no C
    (seeds 003, 004).  Data not separable in the kernel's feature space raises
    :class:`NotSeparableError` (see "Separability" below).
``'l2'``
    2-norm soft margin, squared slack: dual eq. (23), :math:`Q + I/C`
    (:math:`\operatorname{diag}(1/C_i)`), :math:`\alpha \ge 0`.
``'l2-simplex'``
    The L2-SVM of seed 000: :math:`\min \tfrac12\mu^T[K\circ yy^T + yy^T +
    I/C]\mu` over the unit simplex (eqs. 14, 22); bias :math:`b = -y^T\mu` (7);
    decision :math:`\operatorname{sign}(\sum_j\mu_jy_jk(x_j,x) - b)` (19).
``'zero-one'``
    :math:`\min \tfrac12 w\cdot w + \sum_i C_i\chi(y_i f(x_i) < 0)` (eq. 11),
    linear kernel, random search: a *demonstration* of why the hinge loss is
    used (no margin, a combinatorial search); see
    :mod:`maxmargin.solvers.random_search`.

The primal scalings follow the notebook's Lagrangians (:math:`\tfrac12\|w\|^2`),
so one ``C`` means the same thing to every solver.

Solvers and valid pairs
-----------------------
===================  ========================================  ===========================
solver               formulations                              module
===================  ========================================  ===========================
``'smo'``            l1, hard, l2                              :mod:`.solvers.smo`
``'qp'``             l1, hard, l2, l2-simplex                  :mod:`.solvers.qp`
``'frank-wolfe'``    l2-simplex                                :mod:`.solvers.frank_wolfe`
``'primal-qp'``      l1, hard, l2, l2-simplex (linear kernel)  :mod:`.solvers.primal`
``'subgradient'``    l1 (linear kernel)                        :mod:`.solvers.subgradient`
``'random-search'``  zero-one (linear kernel)                  :mod:`.solvers.random_search`
===================  ========================================  ===========================

Frank-Wolfe needs a compact feasible set with a cheap linear minimisation: the
simplex of ``'l2-simplex'`` is that (a vertex per iteration).  The hard and
2-norm duals live on an unbounded cone, and the 1-norm dual's polytope
(box cut by :math:`y^T\alpha = 0`) has no vertex list to take away-steps over, so
Frank-Wolfe is offered for ``'l2-simplex'`` only.

Options (``fit_binary(..., **options)``)
----------------------------------------
Common: ``tol``, ``max_iter`` (-1: the solver's default limit), ``callback``,
``callback_info``, ``time_limit``, ``verbose``, ``shrinking``, ``cache_size``,
``alpha0``; each solver takes those that mean something to it and ignores the
rest.  Solver-specific: see :data:`SOLVER_OPTIONS` (for example
``step='2/(t+2)' | 'line-search' | 'away' | 'pairwise'`` for Frank-Wolfe).
For every solver: ``bias`` (below) and, for ``'hard'``, ``min_margin``.

Bias (offset ``rho``, :math:`f(x) = \sum_i\alpha_iy_iK(x_i,x) - \rho`, so
:math:`b = -\rho`)
-------------------------------------------------------------------------------
``bias=None`` picks the default of the formulation:

==============  ===============  ==============================================================
formulation     default rule     formula, with :math:`s_i = \sum_j\alpha_jy_jK_{ij}`
==============  ===============  ==============================================================
hard            ``'notebook'``   :math:`b = -\tilde\alpha^TH\alpha/1^T\alpha` (eq. 17): exact
l2              ``'notebook'``   same with :math:`H` incl. :math:`I/C` (eq. 23): exact
l1              ``'libsvm'``     mean of :math:`y_iG_i` over free SVs :math:`0<\alpha_i<C_i`
                                 (LIBSVM; SMO computes it), midpoint without free SVs
l2-simplex      ``'simplex'``    :math:`b = -y^T\mu` (seed 000, eq. 7)
primal solvers  (their own)      the solver's :math:`b`
==============  ===============  ==============================================================

For the 1-norm soft margin the notebook prints the same formula as for the hard
margin (eq. 21), but its own derivation multiplies the KKT condition by
:math:`r_i = C - \alpha_i`, which weights each term by :math:`\alpha_ir_i`; the
plain :math:`\alpha_i` weights are exact only when no :math:`\alpha_i = C`.  So
``'l1'`` uses LIBSVM's free-SV average, which is exact at the optimum (every free
SV has :math:`y_if(x_i) = 1`).  The other rules can be asked for:
``'notebook'``, ``'libsvm'``, ``'largest-alpha'`` (seed 003: the SV with the
largest :math:`\alpha` among the free ones), ``'sv-average'`` (seed 004: the mean
over all SVs, exact for hard and 2-norm margins, not for bounded 1-norm SVs).
:func:`bias_from_dual` implements them.

Geometric margin (:func:`geometric_margin`)
-------------------------------------------
hard: :math:`1/\|w\|`; l1: :math:`\min_iy_if(x_i)/\|w\|`
(``train1NormSoftMarginSVM``); l2: :math:`(1 - \max_i\alpha_i/C_i)/\|w\|`
(``train2NormSoftMarginSVM``); l2-simplex: :math:`(\rho_m -
\max_i\mu_i/C_i)/\|w\|` with :math:`\rho_m = \mu^TH\mu` (the same argument on
seed 000's primal (1): :math:`y_if(x_i) = \rho_m - \xi_i`, :math:`\xi = \mu/C`);
zero-one: :math:`\min_iy_if(x_i)/\|w\|` (``trainZeroOneError``).  At the
optimum each equals the definition :math:`g_S = \min_iy_if(x_i)/\|w\|`.

Separability (``'hard'``)
-------------------------
Let :math:`R^2 = \max_iK(x_i,x_i)` and :math:`\gamma_{min}` = ``min_margin``
(default :data:`MIN_MARGIN_FACTOR` :math:`\cdot R`).  At the hard-margin optimum
:math:`\sum\alpha = \|w\|^2 = 1/\gamma^2` and the dual minimum is
:math:`-1/(2\gamma^2)`.  Data whose margin is below :math:`\gamma_{min}` (in
particular data that is not separable at all, where the dual is unbounded) is
reported as not separable, by :class:`NotSeparableError`:

* ``'smo'``, linear kernel: first an exact test, the feasibility LP
  :math:`y_i(w\cdot x_i + b) \ge 1` in :math:`d + 1` variables
  (:func:`linearly_separable`, SciPy's HiGHS); infeasible raises at once.
* ``'smo'``, every kernel: every :math:`\alpha_i` is bounded by :math:`B = 1/\gamma_{min}^2`
  (a bound no separable problem with margin :math:`\ge\gamma_{min}` reaches,
  since :math:`\max_i\alpha_i \le \sum\alpha/2`), so SMO always terminates; the
  solver is stopped as soon as its (monotonically decreasing) objective falls
  below :math:`-B/2`, and after it, any :math:`\alpha_i = B` or a functional
  margin :math:`y_if(x_i) < 1/2` raises.  SMO's objective falls by a bounded
  amount per step when every pair has positive curvature, so this can take
  many steps (about proportional to :math:`B`); for positive-definite kernels
  (RBF) data is inseparable only through contradictory duplicates, whose zero
  curvature sends :math:`\alpha` to the bound in one step.  So, besides, every
  progress report of the solver checks the convex-hull bound
  :math:`\gamma \le \sqrt{\alpha^TQ\alpha}/\sum\alpha` of its iterate
  (:func:`_hull_bound_below`), which on data that is not separable falls below
  :math:`\gamma_{min}` after a small fraction of those steps.
* ``'qp'``: an unbounded dual (Clarabel: dual infeasible), :math:`\sum\alpha > B`
  or a violated margin constraint raises.
* ``'primal-qp'``: an infeasible primal (eq. 7) or :math:`\|w\| > 1/\gamma_{min}`
  raises.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .problem import csvc_problem
from .solvers.divide import OPTIONS as DIVIDE_OPTIONS

FORMULATIONS = ("l1", "hard", "l2", "l2-simplex", "zero-one")
SOLVERS = ("auto", "smo", "batched", "divide", "qp", "frank-wolfe", "primal-qp", "subgradient", "random-search")
#: valid (formulation, solver) pairs
VALID = {
    ("l1", "auto"),
    ("hard", "auto"),
    ("l2", "auto"),
    ("l2-simplex", "auto"),
    ("zero-one", "auto"),
    ("l1", "smo"),
    ("hard", "smo"),
    ("l2", "smo"),
    ("l1", "batched"),
    ("hard", "batched"),
    ("l2", "batched"),
    ("l1", "divide"),
    ("hard", "divide"),
    ("l2", "divide"),
    ("l1", "qp"),
    ("hard", "qp"),
    ("l2", "qp"),
    ("l2-simplex", "qp"),
    ("l2-simplex", "frank-wolfe"),
    ("l1", "primal-qp"),
    ("hard", "primal-qp"),
    ("l2", "primal-qp"),
    ("l2-simplex", "primal-qp"),
    ("l1", "subgradient"),
    ("zero-one", "random-search"),
}
#: solvers that work in the explicit feature space of the linear kernel only
LINEAR_ONLY = ("primal-qp", "subgradient", "random-search")
#: options every solver accepts (each uses those that mean something to it)
COMMON_OPTIONS = (
    "tol",
    "max_iter",
    "shrinking",
    "cache_size",
    "callback",
    "callback_info",
    "time_limit",
    "verbose",
    "alpha0",
)
#: options fit_binary itself understands
FIT_OPTIONS = ("bias", "min_margin")
#: solver-specific options
SOLVER_OPTIONS = {
    "auto": (),
    "smo": (),
    "batched": ("working_set_size_", "inner_max_iter"),
    "divide": DIVIDE_OPTIONS,
    "qp": ("backend", "max_n", "sv_threshold"),
    "frank-wolfe": ("step", "start"),
    "primal-qp": ("backend", "max_n", "sv_threshold"),
    "subgradient": ("batch_size", "averaging", "random_state", "check_every", "min_iter"),
    "random-search": ("n_candidates", "n_starts", "n_local", "batch", "random_state"),
}
#: which common options each solver receives
_PASSED = {
    "smo": ("tol", "max_iter", "shrinking", "cache_size", "callback", "callback_info", "time_limit", "verbose"),
    "batched": ("tol", "max_iter", "shrinking", "cache_size", "callback", "callback_info", "time_limit", "verbose"),
    "divide": ("tol", "max_iter", "shrinking", "cache_size", "callback", "callback_info", "time_limit", "verbose"),
    "qp": ("time_limit", "verbose"),
    "frank-wolfe": ("tol", "max_iter", "cache_size", "callback", "callback_info", "time_limit", "verbose"),
    "primal-qp": ("time_limit", "verbose"),
    "subgradient": ("tol", "max_iter", "callback", "callback_info", "time_limit", "verbose"),
    "random-search": ("callback", "callback_info", "time_limit", "verbose"),
}
#: the two decomposition solvers of the standard dual
SMO_LIKE = ("smo", "batched", "divide")  # divide: SMO-type parts and global step
#: from this many variables on, solver='auto' takes the batched solver for the standard dual
#: (benchmarks/crossover.py on subsets of a9a, ijcnn1, usps, Skin_NonSkin: SMO wins at 2000,
#: at 4000 they are even, at 8000 the batched solver wins on the wide data)
AUTO_BATCHED_MIN_N = 4000


def resolve_solver(formulation, solver, n):
    """The concrete solver ``'auto'`` stands for: the batched working-set solver
    for the standard duals from :data:`AUTO_BATCHED_MIN_N` variables on (SMO
    below), pairwise Frank-Wolfe for 'l2-simplex', random search for 'zero-one'."""
    if solver != "auto":
        return solver
    if formulation == "l2-simplex":
        return "frank-wolfe"
    if formulation == "zero-one":
        return "random-search"
    return "batched" if n >= AUTO_BATCHED_MIN_N else "smo"


BIAS_RULES = ("notebook", "libsvm", "largest-alpha", "sv-average", "simplex")
DEFAULT_BIAS = {"hard": "notebook", "l2": "notebook", "l1": "libsvm", "l2-simplex": "simplex"}
#: default smallest geometric margin, relative to the data radius R, that 'hard' accepts as separable
MIN_MARGIN_FACTOR = 1e-5


class NotSeparableError(ValueError):
    """The training data is not separable in the kernel's feature space (formulation='hard')."""


@dataclass
class BinaryFit:
    """One fitted binary subproblem, labels y in {+1, -1}.

    The decision function is ``f(x) = sum_i coef_i K(x_i, x) - rho`` with
    ``coef = alpha * y`` over the training rows (``alpha`` may be None for
    primal-only solvers, which then set ``w`` and ``rho`` for a linear kernel).

    ``w`` is also set for dual solutions with the linear kernel.  ``margin`` is
    the geometric margin of the formulation (:func:`geometric_margin`, also in
    ``extra['margin']``).  ``extra`` further holds ``w_norm``, ``bias_rule``,
    ``primal_objective`` (and ``duality_gap`` = primal + dual objective for the
    soft-margin duals), ``train_decision`` (f on the training rows) and the
    solver's own extras.
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
    margin: float | None = None
    formulation: str = "l1"
    solver: str = "smo"


def valid_pairs():
    """The valid (formulation, solver) pairs, sorted."""
    return sorted(VALID)


def _pairs_text():
    return ", ".join(f"({f!r}, {s!r})" for f, s in valid_pairs())


def check_pair(formulation, solver, kernel=None):
    """Raise ValueError (listing the valid pairs) for an unknown or invalid combination."""
    if formulation not in FORMULATIONS:
        raise ValueError(
            f"formulation must be one of {FORMULATIONS}, got {formulation!r}; "
            f"valid (formulation, solver) pairs: {_pairs_text()}"
        )
    if solver not in SOLVERS:
        raise ValueError(
            f"solver must be one of {SOLVERS}, got {solver!r}; valid (formulation, solver) pairs: {_pairs_text()}"
        )
    if (formulation, solver) not in VALID:
        raise ValueError(
            f"formulation={formulation!r} cannot be solved by solver={solver!r}; "
            f"valid (formulation, solver) pairs: {_pairs_text()}"
        )
    if kernel is not None and solver in LINEAR_ONLY and not _is_linear(kernel):
        raise ValueError(
            f"solver={solver!r} works in the explicit feature space of the linear kernel only; "
            f"got kernel {getattr(kernel, 'name', kernel)!r}. Use kernel='linear', or a dual solver "
            "('smo', 'qp', 'frank-wolfe') for other kernels"
        )


def _is_linear(kernel):
    name = getattr(kernel, "name", kernel)
    return name == "linear"


def _split_options(solver, options):
    passed, fit_opts = {}, {}
    specific = SOLVER_OPTIONS[solver]
    for key, value in options.items():
        if key in FIT_OPTIONS:
            fit_opts[key] = value
        elif key in specific or key in _PASSED[solver]:
            passed[key] = value
        elif key in COMMON_OPTIONS:
            continue  # meaningless for this solver: ignored
        else:
            owners = [s for s, opts in SOLVER_OPTIONS.items() if key in opts]
            if owners:
                raise ValueError(
                    f"option {key!r} applies to solver {' / '.join(map(repr, owners))}, not to solver={solver!r}"
                )
            allowed = sorted(set(COMMON_OPTIONS) | set(FIT_OPTIONS) | set(specific))
            raise ValueError(f"unknown option {key!r} for solver={solver!r}; accepted: {allowed}")
    return passed, fit_opts


# ----------------------------------------------------------------------- margins
def margin_from_definition(w_norm, y, decision):
    r"""The notebook's minimal geometric margin :math:`g_S = \min_i y_i f(x_i)/\|w\|`."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.min(y * np.asarray(decision, dtype=np.float64)) / w_norm)


def geometric_margin(formulation, alpha, y, C, K_or_w_norm, decision=None, rho=None):
    r"""Geometric margin of a fitted binary problem, by the formula of its formulation.

    Parameters
    ----------
    formulation : one of :data:`FORMULATIONS`
    alpha : ndarray or None
        Dual variables (``mu`` for 'l2-simplex'); None for primal-only fits
        (then ``decision`` is needed for 'l1', 'l2' and 'zero-one').
    y : ndarray of +1 / -1
    C : float or ndarray of per-sample C
    K_or_w_norm : float or ndarray (n, n)
        :math:`\|w\|`, or the Gram matrix of the training rows, from which
        :math:`\|w\|^2 = (\alpha\circ y)^TK(\alpha\circ y)` (and, if ``decision``
        is None, :math:`f = K(\alpha\circ y) - \rho`) are computed.
    decision : ndarray or None
        :math:`f(x_i)` on the training rows (needed by 'l1' and 'zero-one').
    rho : float or None
        Offset, to compute ``decision`` from a Gram matrix ('l2-simplex':
        defaults to :math:`-y^T\mu`).

    Returns
    -------
    float
        hard: :math:`1/\|w\|` (eq. 7 / 17); l1: :math:`\min_iy_if(x_i)/\|w\|`;
        l2: :math:`(1 - \max_i\alpha_i/C_i)/\|w\|`; l2-simplex:
        :math:`(\mu^TH\mu - \max_i\mu_i/C_i)/\|w\|`; zero-one:
        :math:`\min_iy_if(x_i)/\|w\|`.  ``inf`` when :math:`w = 0`.
    """
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    y = np.asarray(y, dtype=np.float64)
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), y.shape)
    if np.ndim(K_or_w_norm) == 2:
        if alpha is None:
            raise ValueError("a Gram matrix needs alpha; pass ||w|| for primal-only fits")
        K = np.asarray(K_or_w_norm, dtype=np.float64)
        coef = np.asarray(alpha, dtype=np.float64) * y
        Kc = K @ coef
        w_norm = float(np.sqrt(max(coef @ Kc, 0.0)))
        if decision is None:
            if rho is None:
                if formulation != "l2-simplex":
                    raise ValueError("pass rho (or decision) with a Gram matrix")
                rho = -float(y @ alpha)
            decision = Kc - rho
    else:
        w_norm = float(K_or_w_norm)
    if not w_norm > 0:
        return float("inf")
    if formulation == "hard":
        return 1.0 / w_norm
    if formulation == "l2":
        if alpha is not None:
            xi_max = float(np.max(np.asarray(alpha) / C))
        else:
            if decision is None:
                raise ValueError("'l2' without alpha needs the training decision values")
            xi_max = float(np.max(np.maximum(0.0, 1.0 - y * decision)))
        return (1.0 - xi_max) / w_norm
    if formulation == "l2-simplex":
        mu = np.asarray(alpha, dtype=np.float64)
        rho_m = w_norm**2 + float(y @ mu) ** 2 + float(np.sum(mu * mu / C))
        return (rho_m - float(np.max(mu / C))) / w_norm
    if decision is None:
        raise ValueError(f"the {formulation!r} margin min_i y_i f(x_i) / ||w|| needs the training decision values")
    return margin_from_definition(w_norm, y, decision)


# -------------------------------------------------------------------------- bias
def bias_from_dual(rule, alpha, y, s, upper, shift):
    r"""The offset ``rho`` (``b = -rho``) of a dual solution by one of :data:`BIAS_RULES`.

    ``s_i = sum_j alpha_j y_j K_ij``, ``upper`` the bounds, ``shift`` the diagonal
    term (``1/C`` for 'l2').  A support vector *on* the margin satisfies
    :math:`y_i(s_i - \rho) = 1 - \text{shift}_i\alpha_i`, i.e. :math:`\rho = s_i -
    y_i(1 - \text{shift}_i\alpha_i)`; the rules average that over different sets.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    t = s - y * (1.0 - shift * alpha)  # rho implied by each variable sitting on the margin
    sv = alpha > 0
    if not sv.any():
        rule = "libsvm"
    if rule == "notebook":
        # b = -(alpha o y)' H alpha / 1'alpha  (seed 002, eqs. 17, 21, 23)
        return float(alpha @ (s + y * shift * alpha) / alpha.sum())
    if rule == "libsvm":
        G = y * s + shift * alpha - 1.0
        from .solvers.smo import compute_rho  # LIBSVM's calculate_rho

        return compute_rho(y, G, alpha, upper)
    free = sv & (alpha < upper)
    if rule == "largest-alpha":  # seed 003: n = argmax alpha (among the free SVs when there are any)
        cand = free if free.any() else sv
        idx = np.flatnonzero(cand)
        return float(t[idx[np.argmax(alpha[idx])]])
    if rule == "sv-average":  # seed 004: mean over all support vectors
        return float(t[sv].mean())
    raise ValueError(f"bias must be one of {BIAS_RULES} or None, got {rule!r}")


# ------------------------------------------------------------------- the fit
def _hard_scale(X, kernel):
    """R^2 = max_i K(x_i, x_i)."""
    d = np.asarray(kernel.diag(X), dtype=np.float64)
    return float(d.max(initial=0.0))


def _min_margin(X, kernel, min_margin):
    if min_margin is not None:
        if not isinstance(min_margin, numbers.Real) or not min_margin > 0:
            raise ValueError(f"min_margin must be a positive number, got {min_margin!r}")
        return float(min_margin)
    r2 = _hard_scale(X, kernel)
    return MIN_MARGIN_FACTOR * np.sqrt(r2) if r2 > 0 else MIN_MARGIN_FACTOR


def _hull_bound_below(info, gamma_min, r2):
    r"""Whether an SMO iterate proves the hard margin below ``gamma_min``.

    A feasible :math:`\alpha` (:math:`\alpha \ge 0`, :math:`y^T\alpha = 0`) divided by
    :math:`s = \sum\alpha/2` gives a point of each class's convex hull in feature space, at
    distance :math:`\sqrt{\alpha^TQ\alpha}/s`; the margin is half the smallest such distance, so
    :math:`\gamma \le \sqrt{\alpha^TQ\alpha}/\sum\alpha`, with :math:`\alpha^TQ\alpha =
    2(\text{objective} + \sum\alpha)`.  On data that is not separable this bound falls like
    :math:`1/\sum\alpha`, long before the objective reaches :math:`-1/(2\gamma_{min}^2)`."""
    total = info.get("alpha_sum")
    if total is None or not total > 0:
        return False
    wsq = max(2.0 * (info["objective"] + total), 0.0) + 1e-12 * max(r2, 1e-300) * total * total  # rounding slack
    return wsq < (gamma_min * total) ** 2


def _not_separable(reason):
    return NotSeparableError(
        "formulation='hard' needs training data that is separable in the kernel's feature space; "
        f"this data is not separable ({reason}). Use formulation='l1' (soft margin) or 'l2', "
        "or a more flexible kernel (e.g. 'rbf')"
    )


def linearly_separable(X, y):
    """Whether some (w, b) has y_i (w . x_i + b) >= 1 for all i: an LP feasibility problem in
    d + 1 variables (SciPy's HiGHS), exact and fast for the linear kernel (dense or CSR X)."""
    from scipy.optimize import linprog

    n, d = X.shape
    Xs = sp.csr_matrix(X, dtype=np.float64)
    A = sp.hstack([-(sp.diags(y) @ Xs), sp.csr_matrix(-y.reshape(-1, 1))], format="csr")
    res = linprog(np.zeros(d + 1), A_ub=A, b_ub=-np.ones(n), bounds=[(None, None)] * (d + 1), method="highs")
    if res.status == 2:  # infeasible
        return False
    if res.status == 0:
        return True
    raise RuntimeError(f"the separability LP failed: {res.message}")


def _dual_scores(problem, alpha, grad):
    """s_i = sum_j alpha_j y_j K_ij on the training rows, from the gradient when there is one."""
    from .solvers.frank_wolfe import SimplexProblem

    y = problem.y
    if isinstance(problem, SimplexProblem):
        if grad is None:
            grad = problem.h_times(alpha, np.flatnonzero(alpha))
        return y * (grad - alpha / problem.C) - float(y @ alpha)
    if grad is not None:
        return y * (grad - problem.p - problem.shift * alpha)
    sv = np.flatnonzero(alpha)
    coef = alpha[sv] * y[sv]
    if problem.kernel.code == 4:
        K = problem.kernel(problem.X, problem.X) if problem.kernel.name == "callable" else problem.X
        K = K.toarray() if sp.issparse(K) else np.asarray(K)
        return K[:, sv] @ coef
    return problem.kernel.mmv(problem.X, problem.X[sv], coef) if sv.size else np.zeros(y.shape[0])


def _linear_w(X, coef):
    return np.asarray(X.T @ coef).ravel()


def _binary_fit(sol, alpha, rho, w, extra, margin, formulation, solver):
    """A :class:`BinaryFit` from a solver's Solution and what fit_binary derived."""
    return BinaryFit(
        alpha=alpha,
        rho=float(rho),
        objective=float(sol.objective),
        n_iter=int(sol.n_iter),
        violation=float(sol.violation),
        converged=bool(sol.converged),
        status=sol.status,
        gap=sol.gap,
        w=w,
        extra=extra,
        margin=margin,
        formulation=formulation,
        solver=solver,
    )


def fits_from_pairs(res, C, kernel, X, solver):
    """:class:`BinaryFit` objects (formulation 'l1') for the one-vs-one problems that
    :func:`maxmargin.solvers.ovo.solve_pairs` solved, with what :func:`fit_binary` adds
    (training decision values, ||w||, margin, primal objective, duality gap) computed
    for all pairs at once; each fit's arrays follow its rows in increasing order."""
    sizes = np.array([r.shape[0] for r in res["rows"]], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    rows = np.concatenate(res["rows"]) if sizes.size else np.zeros(0, dtype=np.int64)
    # y: +1 on the first class's rows (the first n_a of each pair as solve_pairs lays them out)
    n_a = np.asarray(res["n_first"], dtype=np.int64)
    pos = np.arange(rows.shape[0]) - np.repeat(starts, sizes)
    y = np.where(pos < np.repeat(n_a, sizes), 1.0, -1.0)
    unsolved = [p for p, a in enumerate(res["alpha"]) if a is None]
    alpha = np.concatenate([np.zeros(sizes[p]) if a is None else a for p, a in enumerate(res["alpha"])])
    grad = np.concatenate([-np.ones(sizes[p]) if g is None else g for p, g in enumerate(res["grad"])])
    rho = np.asarray(res["rho"], dtype=np.float64).copy()
    objective = np.asarray(res["objective"], dtype=np.float64).copy()
    violation = np.asarray(res["violation"], dtype=np.float64).copy()
    n_iter = np.nan_to_num(np.asarray(res["n_iter"], dtype=np.float64)).astype(np.int64)
    U = C[rows]
    from .solvers.smo import compute_rho

    for p in unsolved:  # stopped before this pair started: the zero start, not converged
        sl = slice(starts[p], starts[p] + sizes[p])
        rho[p] = compute_rho(y[sl], grad[sl], alpha[sl], U[sl])
        objective[p] = 0.0
        violation[p] = 2.0
    rho_v = np.repeat(rho, sizes)
    s = y * (grad + 1.0)  # sum_j alpha_j y_j K_tj from the gradient G = Q alpha - e
    decision = s - rho_v
    w_sq = np.maximum(np.add.reduceat(alpha * y * s, starts) if sizes.size else np.zeros(0), 0.0)
    w_norm = np.sqrt(w_sq)
    funct = y * decision
    min_funct = np.minimum.reduceat(funct, starts) if sizes.size else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(w_norm > 0, min_funct / w_norm, np.inf)
    primal = 0.5 * w_sq + (np.add.reduceat(U * np.maximum(0.0, 1.0 - funct), starts) if sizes.size else 0.0)
    linear = _is_linear(kernel)
    status = res["status"]
    fits = []
    for p in range(sizes.shape[0]):
        sl = slice(starts[p], starts[p] + sizes[p])
        order = np.argsort(rows[sl], kind="stable")
        a_p = alpha[sl][order]
        converged = status == "converged" and res["alpha"][p] is not None
        extra = dict(
            margin=float(margin[p]),
            w_norm=float(w_norm[p]),
            bias_rule="libsvm",
            train_decision=decision[sl][order],
            primal_objective=float(primal[p]),
            duality_gap=float(primal[p] + objective[p]),
        )
        w = _linear_w(X[rows[sl][order]], a_p * y[sl][order]) if linear else None
        fits.append(
            BinaryFit(
                alpha=a_p,
                rho=float(rho[p]),
                objective=float(objective[p]),
                n_iter=int(n_iter[p]),
                violation=float(violation[p]),
                converged=bool(converged),
                status="converged" if converged else status,
                w=w,
                extra=extra,
                margin=float(margin[p]),
                formulation="l1",
                solver=solver,
            )
        )
    return fits


def fit_binary(X, y, C, kernel, formulation="l1", solver="smo", **options):
    """Fit one binary problem.

    Parameters
    ----------
    X : training data (dense, CSR, or the Gram matrix for a precomputed kernel)
    y : ndarray of +1.0 / -1.0
    C : float or ndarray of per-sample C (C times sample and class weights);
        ignored by 'hard'
    kernel : maxmargin.kernels.Kernel
    formulation, solver : see the module docstring (:data:`VALID`)
    options : see "Options" in the module docstring; an option that belongs to
        another solver, or that no solver knows, raises ValueError.

    Raises
    ------
    ValueError
        An invalid pair (the message lists the valid ones), a primal-only solver
        with a non-linear kernel, or a bad option.
    NotSeparableError
        ``formulation='hard'`` on data that is not separable in feature space.
    maxmargin.solvers.qp.QPTooLargeError
        ``solver='qp'`` (or ``'primal-qp'``) on a problem above its size limit.
    """
    check_pair(formulation, solver, kernel)
    y = np.asarray(y, dtype=np.float64)
    if solver == "auto":
        solver = resolve_solver(formulation, solver, y.shape[0])
        if solver == "frank-wolfe":
            options.setdefault("step", "pairwise")
        check_pair(formulation, solver, kernel)
    C = np.ascontiguousarray(np.broadcast_to(np.asarray(C, dtype=np.float64), y.shape))
    passed, fit_opts = _split_options(solver, options)
    bias_rule = fit_opts.get("bias")
    if bias_rule is not None and bias_rule not in BIAS_RULES:
        raise ValueError(f"bias must be one of {BIAS_RULES} or None, got {bias_rule!r}")
    if solver in ("smo", "batched", "divide", "qp", "frank-wolfe"):
        return _fit_dual(
            X, y, C, kernel, formulation, solver, passed, bias_rule, fit_opts.get("min_margin"), options.get("alpha0")
        )
    if bias_rule is not None:
        raise ValueError(f"bias={bias_rule!r} applies to the dual solvers; solver={solver!r} finds b itself")
    return _fit_primal(X, y, C, formulation, solver, passed, fit_opts.get("min_margin"))


def _fit_dual(X, y, C, kernel, formulation, solver, passed, bias_rule, min_margin, alpha0):
    from .solvers.frank_wolfe import SimplexProblem

    if formulation == "l2-simplex":
        if bias_rule not in (None, "simplex"):
            raise ValueError("formulation='l2-simplex' has its own bias b = -y'mu (seed 000, eq. 7): use bias=None")
        problem = SimplexProblem(X, kernel, y, C)
    elif bias_rule == "simplex":
        raise ValueError("bias='simplex' (b = -y'mu) belongs to formulation='l2-simplex'")
    gamma_min = bound = None
    if formulation == "l1":
        problem = csvc_problem(X, kernel, y, C)
    elif formulation == "l2":
        problem = csvc_problem(X, kernel, y, C, shift=1.0 / C, hard=True)
    elif formulation == "hard":
        gamma_min = _min_margin(X, kernel, min_margin)
        bound = 1.0 / gamma_min**2
        if solver in SMO_LIKE:
            if _is_linear(kernel) and not linearly_separable(X, y):
                raise _not_separable("no (w, b) satisfies y_i (w . x_i + b) >= 1: the separability LP is infeasible")
            problem = csvc_problem(X, kernel, y, np.full(y.shape, bound))
        else:
            problem = csvc_problem(X, kernel, y, C, hard=True)
    if alpha0 is not None and formulation != "l2-simplex":
        problem.alpha0 = np.asarray(alpha0, dtype=np.float64)

    stopped_unbounded = [False]
    if solver in SMO_LIKE:
        from .solvers import batched, divide, smo

        if formulation == "hard":
            user_cb = passed.get("callback")

            r2 = _hard_scale(X, kernel)

            def guard(info):
                if info.get("objective", 0.0) < -0.5 * bound or _hull_bound_below(info, gamma_min, r2):
                    stopped_unbounded[0] = True
                    return False
                return None if user_cb is None else user_cb(info)

            passed = dict(passed, callback=guard)
            if passed.get("callback_info") is None:
                passed.pop("callback_info", None)
        sol = {"smo": smo, "batched": batched, "divide": divide}[solver].solve(problem, **passed)
    elif solver == "qp":
        from .solvers import qp

        try:
            sol = qp.solve(problem, **passed)
        except qp.QPUnboundedError as exc:
            if formulation == "hard":
                raise _not_separable("the dual QP is unbounded") from exc
            raise
    else:
        from .solvers import frank_wolfe

        sol = frank_wolfe.solve(problem, **passed)

    alpha = sol.alpha
    s = _dual_scores(problem, alpha, sol.grad)
    if formulation == "l2-simplex":
        rule = "simplex"
        rho = problem.rho(alpha)
        shift = 1.0 / C
    else:
        rule = bias_rule or DEFAULT_BIAS[formulation]
        shift = problem.shift
        if rule == "libsvm" and solver in SMO_LIKE:
            rho = float(sol.rho)
        else:
            rho = bias_from_dual(rule, alpha, y, s, problem.upper, shift)
    decision = s - rho
    w_norm = float(np.sqrt(max(float((alpha * y) @ s), 0.0)))

    if formulation == "hard":
        funct = y * decision
        if stopped_unbounded[0]:
            raise _not_separable(f"the solver's multipliers prove margin < min_margin = {gamma_min:.3g}")
        if solver in SMO_LIKE and np.any(alpha >= bound * (1 - 1e-9)):
            raise _not_separable(f"a multiplier reached its bound 1/min_margin^2: margin < {gamma_min:.3g}")
        if alpha.sum() > bound:
            raise _not_separable(f"sum(alpha) = ||w||^2 > 1/min_margin^2: margin < {gamma_min:.3g}")
        limit = 0.5 if solver in SMO_LIKE else 1.0 - 1e-4
        if sol.converged and funct.size and funct.min() < limit:
            raise _not_separable(f"after convergence a training point has y f(x) = {funct.min():.3g} < 1")

    margin = geometric_margin(formulation, alpha, y, C, w_norm, decision=decision)
    extra = dict(sol.extra)
    extra.update(margin=margin, w_norm=w_norm, bias_rule=rule, train_decision=decision)
    if formulation in ("l1", "l2", "hard"):
        xi = np.maximum(0.0, 1.0 - y * decision)
        if formulation == "l1":
            primal = 0.5 * w_norm**2 + float(C @ xi)
        elif formulation == "l2":
            primal = 0.5 * w_norm**2 + 0.5 * float(C @ (xi * xi))
        else:
            primal = 0.5 * w_norm**2
        extra["primal_objective"] = primal
        if formulation != "hard":
            extra["duality_gap"] = primal + float(sol.objective)
    w = _linear_w(X, alpha * y) if _is_linear(kernel) else None
    return _binary_fit(sol, alpha, rho, w, extra, margin, formulation, solver)


def _fit_primal(X, y, C, formulation, solver, passed, min_margin):
    from .solvers.primal import PrimalProblem

    problem = PrimalProblem(X, y, C, formulation)
    if solver == "primal-qp":
        from .solvers import primal, qp

        try:
            sol = primal.solve(problem, **passed)
        except qp.QPInfeasibleError as exc:
            if formulation == "hard":
                raise _not_separable("the primal QP (eq. 7) is infeasible") from exc
            raise
    elif solver == "subgradient":
        from .solvers import subgradient

        sol = subgradient.solve(problem, **passed)
    else:
        from .solvers import random_search

        sol = random_search.solve(problem, **passed)
    w = sol.w
    w_norm = float(np.sqrt(w @ w))
    decision = problem.scores(w, sol.intercept)
    if formulation == "hard":
        from .kernels import LinearKernel

        gamma_min = _min_margin(X, LinearKernel(), min_margin)
        if w_norm > 1.0 / gamma_min:
            raise _not_separable(f"||w|| > 1/min_margin: margin < {gamma_min:.3g}")
    margin = geometric_margin(formulation, sol.alpha, y, C, w_norm, decision=decision)
    extra = dict(sol.extra)
    extra.update(margin=margin, w_norm=w_norm, bias_rule="primal", train_decision=decision)
    return _binary_fit(sol, sol.alpha, sol.rho, w, extra, margin, formulation, solver)
