r"""The registry: formulation objects, and the one route from (formulation, solver) to a fit.

A formulation is a small object (:class:`Formulation`) that knows

* ``problems``: the kinds of problem it can be posed as
  (:data:`maxmargin.solvers.registry.PROBLEM_KINDS`), first the preferred;
* ``params``: the keyword options it reads itself (``bias``, ``nu``, ...);
* ``build(kind, data, solver, params) -> problem``;
* ``finish(problem, solution, data, solver, params) -> BinaryFit``.

The solvers declare the kinds they take (:mod:`maxmargin.solvers.registry`), so a
(formulation, solver) pair is valid exactly when they share a kind.  :func:`fit`
builds, solves and finishes; every estimator goes through it.

The training rows are an index array ``rows`` into ``X``: the dual problems carry it
as their ``index``.  A solver whose row cache is keyed by data row (trait
``'gathered-rows'``: SMO and the batched solver, measured 1.3-2x faster so) gets a
strict subset gathered once into a block of its own (every row of X is never
copied); the explicit primal and simplex problems, small by nature, take ``X[rows]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..kernels.formulas import PRECOMPUTED
from ..kernels.rowcache import given_gram, gram_kept, gram_pays
from ..solvers import ipm, registry

#: from this many variables on, solver='auto' takes the batched solver for the standard duals
#: (benchmarks/crossover.py on subsets of a9a, ijcnn1, usps, Skin_NonSkin: SMO wins at 2000,
#: at 4000 they are even, at 8000 the batched solver wins on the wide data)
AUTO_BATCHED_MIN_N = 4000

#: ... and from this many rows on where a kernel row is dear: at least AUTO_DEAR_MIN_WORK stored values
#: (rows x features, or the sparse rows' nonzeros) -- SMO computes its rows one at a time (a matrix-vector
#: product each), the batched solver in blocks.  benchmarks/crossover.py, SMO / batched at 1000 / 2000 / 3000
#: rows: dense2k (2,000 features) 1.88 / 5.58 / 4.02, mnist (784) 0.70 / 1.19 / 2.78, usps (256) 0.77 / 0.72 /
#: 1.20; text2 at 3000 rows (58 nonzeros a row) 0.27 against 0.38-0.43 s.
AUTO_DEAR_MIN_N = 1000
AUTO_DEAR_MIN_WORK = 2_000_000


#: solver='auto' takes SMO over the whole kernel matrix, computed at once (:func:`maxmargin.kernels.rowcache.
#: gram_pays`: dense rows of >= 128 features, the matrix within ``cache_size``), up to this many rows, also where
#: the rows are dear (:func:`rows_dear_for_smo`).  The batched solver computes only the rows it visits: it wins
#: where few rows are support vectors, the whole matrix where most are (``/tmp/s16/band.py``, ``big.py``:
#: whole matrix / batched, ms; unit-norm embeddings, 13-20% support vectors: 1,000 x 1,024 25 / 53, 2,000 x 384
#: 44 / 41, 2,000 x 768 66 / 131, 3,000 x 768 131 / 101, 3,500 x 1,024 239 / 176, 4,000 x 768 272 / 208, 6,000
#: x 384 718 / 187; random data, every row a support vector: 2,000 x 300 73 / 134, 3,000 x 2,000 409 / 1,048,
#: 5,000 x 1,000 587 / 1,119).  Below ``AUTO_BATCHED_MIN_N`` where 'auto' keeps SMO, SMO reads the whole matrix
#: whenever it fits (row by row it lost every case: 3,000 x 256 embeddings 123 against 104 ms, random 836
#: against 153 ms).
GRAM_MAX_N = 2500

#: the solvers' default cache_size (MB)
DEFAULT_CACHE_MB = 200.0


def smo_on_gram(X, n, kernel=None, cache_size=DEFAULT_CACHE_MB):
    """Whether solver='auto' should run SMO over the whole kernel matrix of ``n`` rows of ``X``
    (:data:`GRAM_MAX_N`, lifted where the matrix serves more than the fit: ``probability=True``'s folds,
    :func:`maxmargin.kernels.rowcache.keeping_gram`; ``kernel`` None: one with a formula).  With the folds
    (``/tmp/s16/bigp.py``, probability fits, ms, batched full fit and shared-row folds / the whole matrix for
    both): dense2k 5,000 x 2,000 3,830 / 1,680, embeddings 4,000 x 768 490 / 330, 5,000 x 384 430 / 370)."""
    return (n <= GRAM_MAX_N or gram_kept()) and gram_pays(X, kernel, n, cache_size)


def _dense_precomputed(X, kernel):
    """Whether ``X`` is a dense precomputed kernel matrix: solver='auto' takes SMO over it at every size, as its
    pinned row cache (no kernel value to compute, so the batched solver's blocks gain nothing; make_classification
    standardised, RBF matrices, SMO / batched: 4,500 rows 152 / 339 ms, 8,000 rows 520 / 2,621 ms, 8,000 rows at
    C = 100 689 / 1,979 ms, 12,000 rows 393 / 6,304 ms, the same objectives to 1e-7)."""
    return given_gram(X, kernel)


def rows_dear_for_smo(X, n, kernel=None, cache_size=None):
    """Whether ``n`` rows of ``X`` (the rows a problem uses) make kernel rows dear enough that solver='auto'
    should take the batched solver below :data:`AUTO_BATCHED_MIN_N` (never for a precomputed or callable
    kernel, whose rows cost nothing to compute or cannot be blocked; with ``cache_size``, never where SMO
    computes the whole kernel matrix at once, :func:`smo_on_gram`)."""
    if n < AUTO_DEAR_MIN_N or X is None or len(getattr(X, "shape", ())) != 2:
        return False
    if kernel is not None and (getattr(kernel, "code", None) == PRECOMPUTED or kernel.name == "callable"):
        return False
    if cache_size is not None and smo_on_gram(X, n, kernel, cache_size):
        return False
    per_row = X.nnz / max(X.shape[0], 1) if sp.issparse(X) else X.shape[1]
    return n * per_row >= AUTO_DEAR_MIN_WORK


#: formulation name -> Formulation object (filled by :func:`register`)
REGISTRY = {}


@dataclass
class BinaryFit:
    """One fitted problem with a single decision function.

    The decision function is ``f(x) = sum_i coef_i K(x_i, x) - rho`` over the
    training rows; for classification ``coef = alpha * y`` (labels y in {+1, -1}),
    for epsilon/nu-SVR ``coef = alpha - alpha*``, for one-class ``coef = alpha``
    (``coef`` is always set by :func:`fit`; ``alpha`` may be None for primal-only
    solvers, which then set ``w`` and ``rho`` for a linear kernel).

    ``w`` is also set for dual solutions with the linear kernel.  ``margin`` is
    the geometric margin of the formulation (``extra['margin']`` too).  ``extra``
    further holds ``w_norm``, ``bias_rule``, ``primal_objective`` (and
    ``duality_gap`` = primal + dual objective for the soft-margin duals),
    ``train_decision`` (f on the training rows) and the solver's own extras.
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
    coef: np.ndarray | None = None

    @classmethod
    def from_solution(cls, sol, rho, formulation, coef, **fields):
        """A fit carrying a solver's Solution (objective, iterations, violation, status, gap, extras)."""
        fields.setdefault("extra", dict(sol.extra))
        fields.setdefault("alpha", sol.alpha)
        return cls(
            rho=float(rho),
            objective=float(sol.objective),
            n_iter=int(sol.n_iter),
            violation=float(sol.violation),
            converged=bool(sol.converged),
            status=sol.status,
            gap=sol.gap,
            formulation=formulation,
            coef=coef,
            **fields,
        )


@dataclass
class Data:
    """The training data of one problem: rows ``rows`` of ``X`` (None: every row), with
    labels or targets ``y`` and per-row bounds ``C`` (C times the weights) over those rows."""

    X: object
    y: np.ndarray
    C: np.ndarray
    kernel: object
    rows: np.ndarray | None = None

    @property
    def n(self):
        return self.y.shape[0]

    @property
    def index(self):
        """Row of ``X`` of each training point (int64)."""
        if self.rows is None:
            return np.arange(self.n, dtype=np.int64)
        return np.ascontiguousarray(self.rows, dtype=np.int64)

    @property
    def precomputed(self):
        return getattr(self.kernel, "name", "") == "precomputed"

    def subset(self):
        """``X`` restricted to the rows (a copy, for the explicit primal and simplex problems)."""
        if self.rows is None:
            return self.X
        return self.X[self.rows][:, self.rows] if self.precomputed else self.X[self.rows]

    def all_rows(self):
        """Whether the rows are every row of X, in order."""
        rows = self.rows
        return rows is None or (rows.shape[0] == self.X.shape[0] and bool(np.all(rows == np.arange(rows.shape[0]))))

    def gathered(self):
        """The same data with a strict subset of rows gathered into a block of its own."""
        if self.all_rows():
            return Data(self.X, self.y, self.C, self.kernel, None)
        return Data(self.subset(), self.y, self.C, self.kernel, None)

    def linear_w(self, coef):
        """``w = sum_i coef_i x_i`` (linear kernel)."""
        X = self.X if self.rows is None else self.X[self.rows]
        return np.asarray(X.T @ coef).ravel()


class Formulation:
    """One formulation: how its problem is built and how a solution becomes a fit."""

    name = ""
    #: kinds of problem it can be posed as, the preferred first
    problems = ()
    #: keyword options it reads itself (the rest go to the solver)
    params = ()

    def n_var(self, data):
        """Number of dual variables (what solver='auto' goes by)."""
        return data.n

    def auto(self, n_var):
        """(solver, default options) that ``'auto'`` stands for."""
        return ("batched" if n_var >= AUTO_BATCHED_MIN_N else "smo"), {}

    def kind_for(self, spec):
        for kind in self.problems:
            if spec.takes(kind):
                return kind
        return None

    def check_params(self, params, kind):
        """Validate the formulation's own options for a problem of ``kind``."""

    def build(self, kind, data, spec, params):  # pragma: no cover - abstract
        raise NotImplementedError

    def solve(self, problem, spec, passed, data, params):
        return spec.solve(problem, **passed)

    def finish(self, problem, sol, data, spec, params):  # pragma: no cover - abstract
        raise NotImplementedError


def register(form):
    """Add a formulation object to :data:`REGISTRY` (returns it)."""
    REGISTRY[form.name] = form
    return form


def get(name):
    """The registered formulation ``name`` (ValueError naming the known ones)."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"formulation must be one of {tuple(REGISTRY)}, got {name!r}") from None


def solvers_for(name):
    """The solvers that take formulation ``name``, ``'auto'`` first (kept per formulation object and
    registered solvers: every fit asks two or three times, ~15 us each on a fit of ~1 ms)."""
    form = get(name)
    specs = registry.specs()
    key = (name, id(form), tuple(specs))
    found = _SOLVERS_FOR.get(key)
    if found is None:
        found = ("auto",) + tuple(s for s, spec in specs.items() if form.kind_for(spec) is not None)
        _SOLVERS_FOR[key] = found
    return found


#: :func:`solvers_for`'s answers
_SOLVERS_FOR = {}


def _is_linear(kernel):
    return getattr(kernel, "name", kernel) == "linear"


def check_solver(name, solver, kernel=None):
    """Raise ValueError (naming the solvers that fit) for a solver that cannot solve
    formulation ``name``, or a primal-only solver with a non-linear kernel."""
    ok = solvers_for(name)
    if solver not in ok:
        known = ("auto",) + tuple(registry.specs())
        if solver not in known:
            raise ValueError(f"solver must be one of {known}, got {solver!r}; for {name!r}: {ok}")
        raise ValueError(f"formulation={name!r} cannot be solved by solver={solver!r}; it can by {ok}")
    spec = registry.spec(solver) if solver != "auto" else None
    poly_too = spec is not None and spec.has("poly-kernel") and getattr(kernel, "name", kernel) == "poly"
    if kernel is not None and spec is not None and spec.linear_only and not _is_linear(kernel) and not poly_too:
        raise ValueError(
            f"solver={solver!r} works in the explicit feature space of the linear kernel only; "
            f"got kernel {getattr(kernel, 'name', kernel)!r}. Use kernel='linear', or a dual solver "
            "('smo', 'qp', 'frank-wolfe') for other kernels"
        )


def fit(name, X, y, C, kernel, solver="auto", rows=None, **options):
    """Fit one problem of formulation ``name`` on rows ``rows`` of ``X`` (None: all).

    ``y`` (labels +1/-1, or regression targets) and ``C`` (a scalar or per-row bounds:
    C times the weights; the weights themselves for one-class) are over those rows.
    ``options``: the formulation's own (``bias``, ``nu``, ...), the common solver
    options and the solver's own; an option nobody takes raises ValueError.
    ``alpha0`` (a starting point over the dual variables) warm-starts the dual solvers.
    """
    form = get(name)
    check_solver(name, solver, kernel)
    y = np.asarray(y, dtype=np.float64)
    C = np.ascontiguousarray(np.broadcast_to(np.asarray(C, dtype=np.float64), y.shape))
    data = Data(X, y, C, kernel, None if rows is None else np.asarray(rows, dtype=np.int64))
    cache = options.get("cache_size", DEFAULT_CACHE_MB)
    given = _dense_precomputed(X, kernel)
    if solver == "auto":
        solver, defaults = form.auto(form.n_var(data))
        if form.auto(1)[0] == "smo" and (given or smo_on_gram(X, data.n, kernel, cache)):
            solver, defaults = form.auto(1)  # SMO over the whole kernel matrix, whatever the size
        elif solver == "smo" and rows_dear_for_smo(X, data.n, kernel):
            if form.auto(AUTO_BATCHED_MIN_N)[0] == "batched":  # SMO's rows one by one would cost more
                solver = "batched"
        if solver in ("smo", "batched") and "dual" in form.problems and ipm.pays(X, kernel, form.n_var(data)):
            # the linear kernel on few features: SMO within a budget, then the interior point (solvers/ipm.py)
            solver, defaults = "ipm", {**defaults, "smo_first": True}
        elif solver in ("smo", "batched") and "dual" in form.problems and ipm.pays_poly(X, kernel, form.n_var(data)):
            # the polynomial kernel on few explicit features: the solver 'auto' took, within a budget, then the
            # interior point on those features
            solver, defaults = "ipm", {**defaults, "smo_first": True, "first_solver": solver}
        options = {**defaults, **options}
        check_solver(name, solver, kernel)
    spec = registry.spec(solver)
    if spec.has("gathered-rows") or (solver == "smo" and (given or gram_pays(X, kernel, data.n, cache))):
        data = data.gathered()  # (SMO's whole kernel matrix covers the rows of its data: a pair's rows only)
    passed, params = registry.split_options(solver, options, form.params)
    kind = form.kind_for(spec)
    form.check_params(params, kind)
    problem = form.build(kind, data, spec, params)
    alpha0 = options.get("alpha0")
    if alpha0 is not None and kind in ("dual", "csvc-dual", "nu-dual"):
        problem.alpha0 = np.asarray(alpha0, dtype=np.float64)
    sol = form.solve(problem, spec, passed, data, params)
    out = form.finish(problem, sol, data, spec, params)
    out.solver = solver
    return out


def dual_scores(problem, alpha, grad):
    """``s_t = sum_j alpha_j y_j K(x_t, x_j)`` at the problem's variables, from the gradient
    :math:`G = Q\\alpha + p` when there is one (``Q`` with its diagonal shift)."""
    y = problem.y
    if grad is not None:
        return y * (grad - problem.p - problem.shift * alpha)
    idx = problem.index
    sv = np.flatnonzero(alpha)
    if sv.size == 0:
        return np.zeros(y.shape[0])
    coef = alpha[sv] * y[sv]
    kernel = problem.kernel
    if kernel.code == 4:
        if kernel.name == "callable":
            u, inv = np.unique(idx, return_inverse=True)
            K = kernel(problem.X[u], problem.X[u])[np.ix_(inv, inv[sv])]
        else:
            K = problem.X[idx][:, idx[sv]]
            K = K.toarray() if sp.issparse(K) else np.asarray(K)
        return K @ coef
    return kernel.mmv(problem.X[idx], problem.X[idx[sv]], coef)
