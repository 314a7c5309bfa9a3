r"""From (formulation, solver) to a fit: the registry of formulations.

Every estimator reaches its solver through :func:`fit` (``fit_binary`` is its
classification form): a formulation object (:mod:`.base`) builds the problem,
the solver named by the user solves it, and the formulation turns the solution
into a :class:`BinaryFit`.  Formulations say which kinds of problem they can be
posed as, solvers which kinds they take (:mod:`maxmargin.solvers.registry`): the
valid pairs follow from those declarations, there is no table of pairs.

=================  ==========================================  ==========================
module             formulations                                estimator
=================  ==========================================  ==========================
:mod:`.classification`  l1, hard, l2, l2-simplex, zero-one     SVC (``formulation``)
:mod:`.classification`  nu-svc                                 NuSVC
:mod:`.single`     eps-svr, nu-svr, one-class                  SVR, NuSVR, OneClassSVM
:mod:`.margins`    margins, offsets, separability              (all)
=================  ==========================================  ==========================

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

Solvers and valid pairs (as the declarations give them; :func:`valid_pairs`)
-------------------------------------------------------------------------------
===================  ========================================  ===========================
solver               formulations                              module
===================  ========================================  ===========================
``'smo'``            l1, hard, l2 (and nu-svc, the SVR types,  :mod:`.solvers.smo`
                     one-class)
``'batched'``        as ``'smo'``                              :mod:`.solvers.batched`
``'qp'``             l1, hard, l2, l2-simplex (and nu-svc,     :mod:`.solvers.qp`
                     the SVR types, one-class)
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

Options (``fit(..., **options)``)
---------------------------------
Common: ``tol``, ``max_iter`` (-1: the solver's default limit), ``callback``,
``callback_info``, ``time_limit``, ``verbose``, ``shrinking``, ``cache_size``,
``alpha0``; each solver takes those that mean something to it and ignores the
rest.  Solver-specific: each solver's ``OWN_OPTIONS`` (:data:`SOLVER_OPTIONS`; for example
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

from ..solvers import registry as _registry
from .base import (
    AUTO_BATCHED_MIN_N,
    AUTO_DEAR_MIN_N,
    AUTO_DEAR_MIN_WORK,
    GRAM_MAX_N,
    REGISTRY,
    BinaryFit,
    Data,
    Formulation,
    check_solver,
    dual_scores,
    fit,
    get,
    register,
    rows_dear_for_smo,
    smo_on_gram,
    solvers_for,
)
from .classification import CLASSIFIERS, DEFAULT_BIAS, nu_no_margin_message
from .margins import (
    BIAS_RULES,
    MIN_MARGIN_FACTOR,
    NotSeparableError,
    bias_from_dual,
    geometric_margin,
    linearly_separable,
    margin_from_definition,
)
from .pairs import fits_from_pairs
from .single import EPS_SVR, NU_SVR, ONE_CLASS  # noqa: F401  (registers them)

#: SVC's formulations
FORMULATIONS = CLASSIFIERS
#: every solver name, 'auto' first
SOLVERS = ("auto",) + tuple(_registry.MODULES)
#: the valid (formulation, solver) pairs of SVC's formulations, derived from the declarations
VALID = frozenset((f, s) for f in FORMULATIONS for s in solvers_for(f))
#: solvers that work in the explicit feature space of the linear kernel only
LINEAR_ONLY = tuple(s for s, spec in _registry.specs().items() if spec.linear_only)
#: options every solver accepts (each uses those that mean something to it)
COMMON_OPTIONS = _registry.COMMON_OPTIONS
#: each solver's own options
SOLVER_OPTIONS = {"auto": ()} | {s: spec.own_options for s, spec in _registry.specs().items()}


def resolve_solver(formulation, solver, n):
    """The concrete solver ``'auto'`` stands for with ``n`` variables: the batched working-set
    solver for the standard duals from :data:`AUTO_BATCHED_MIN_N` variables on (SMO below),
    pairwise Frank-Wolfe for 'l2-simplex', random search for 'zero-one'."""
    if solver != "auto":
        return solver
    return get(formulation).auto(n)[0]


def valid_pairs():
    """The valid (formulation, solver) pairs of SVC's formulations, sorted."""
    return sorted(VALID)


def _pairs_text():
    return ", ".join(f"({f!r}, {s!r})" for f, s in valid_pairs())


def check_pair(formulation, solver, kernel=None):
    """Raise ValueError (listing the valid pairs) for an unknown or invalid combination
    of SVC's ``formulation`` and ``solver``."""
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
    check_solver(formulation, solver, kernel)


def fit_binary(X, y, C, kernel, formulation="l1", solver="smo", rows=None, **options):
    """Fit one binary classification problem (:func:`fit` for SVC's formulations).

    Parameters
    ----------
    X : training data (dense, CSR, or the Gram matrix for a precomputed kernel)
    y : ndarray of +1.0 / -1.0 (over ``rows``)
    C : float or ndarray of per-sample C (C times sample and class weights);
        ignored by 'hard'
    kernel : maxmargin.kernels.Kernel
    formulation, solver : see the module docstring (:data:`VALID`)
    rows : index array into X (None: every row); the dual problems are posed on
        those rows without copying X
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
    return fit(formulation, X, y, C, kernel, solver, rows=rows, **options)


__all__ = [
    "AUTO_BATCHED_MIN_N",
    "AUTO_DEAR_MIN_N",
    "AUTO_DEAR_MIN_WORK",
    "BIAS_RULES",
    "BinaryFit",
    "COMMON_OPTIONS",
    "DEFAULT_BIAS",
    "Data",
    "FORMULATIONS",
    "Formulation",
    "LINEAR_ONLY",
    "MIN_MARGIN_FACTOR",
    "NotSeparableError",
    "REGISTRY",
    "SOLVERS",
    "SOLVER_OPTIONS",
    "VALID",
    "bias_from_dual",
    "check_pair",
    "check_solver",
    "dual_scores",
    "fit",
    "fit_binary",
    "fits_from_pairs",
    "geometric_margin",
    "get",
    "linearly_separable",
    "margin_from_definition",
    "nu_no_margin_message",
    "register",
    "rows_dear_for_smo",
    "smo_on_gram",
    "GRAM_MAX_N",
    "resolve_solver",
    "solvers_for",
    "valid_pairs",
]
