r"""Linear SVMs at scale: :class:`LinearSVC` and :class:`LinearSVR`, LIBLINEAR's models with compiled solvers.

Both have the parameters and fitted attributes of ``sklearn.svm.LinearSVC`` / ``LinearSVR`` with the same
meaning (and the same errors for combinations that do not exist), and solve the same problems as LIBLINEAR:
with :math:`x_i` extended by the constant ``intercept_scaling`` (when ``fit_intercept``) and per-sample
:math:`C_i = C \cdot` ``sample_weight`` :math:`_i \cdot` ``class_weight`` :math:`_{y_i}`,

=================================  ==========  =====================================================  =================
penalty, loss                      dual        primal objective                                       solver
=================================  ==========  =====================================================  =================
l2, hinge                          True        :math:`\tfrac12\|w\|^2 + \sum C_i\xi_i`                 dual CD, then IPM
l2, squared_hinge                  True        :math:`\tfrac12\|w\|^2 + \sum C_i\xi_i^2`               dual CD, then TRON
l2, squared_hinge                  False       same                                                   TRON (``tron``)
l1, squared_hinge                  False       :math:`\|w\|_1 + \sum C_i\xi_i^2`                       CD (``cd_l1``)
multi_class='crammer_singer'       (ignored)   :math:`\tfrac12\sum_m\|w_m\|^2 + \sum C_i\max_m(...)`   dual CD, then IPM
SVR epsilon_insensitive            True        :math:`\tfrac12\|w\|^2 + \sum C_i|r_i|_\epsilon`        dual CD, then IPM
SVR squared_epsilon_insensitive    True/False  :math:`\tfrac12\|w\|^2 + \sum C_i|r_i|_\epsilon^2`      dual CD, then TRON / TRON
=================================  ==========  =====================================================  =================

with :math:`\xi_i = \max(0, 1 - y_i w\cdot x_i)` and :math:`|r|_\epsilon = \max(0, |w\cdot x_i - y_i| -
\epsilon)`.  The bias weight is part of :math:`w` and regularised, as in LIBLINEAR.  "Dual CD, then TRON": as
LIBLINEAR from 2.42, the dual solver of a squared loss runs at most 300 epochs; if it has not met ``tol`` by
then, the primal Newton method continues from its ``w`` (``solvers.dual_primal``; only when ``max_iter`` > 300,
so a smaller ``max_iter`` stops the dual solver there).  Unlike LIBLINEAR, the switch comes as soon as the
epochs' progress shows that they will not meet ``tol`` within the 300 (``dual_primal.StallWatch``, from epoch
50).  "Dual CD, then IPM" (the L1 losses, which have no smooth primal): where the epochs will not meet ``tol``
within ``max_iter`` and an interior point on the active rows' low-rank dual costs less than the epochs left, it
takes over (``solvers.dual_ipm``; its result is the fit at a relative duality gap of ``min(1e-5, tol)``, else the
epochs start from it).  Crammer-Singer likewise, where the epochs stall with a duality gap above half the
primal objective (unscaled columns) and an interior point on the whole dual costs less than four times the
epochs left (``solvers.cs_ipm``; accepted at ``min(1e-4, tol)``).  ``dual='auto'`` picks the
dual when there are fewer samples than features (scikit-learn's rule).  ``tol`` is LIBLINEAR's ``-e``.  "TRON"
is the primal Newton method of ``solvers.tron``: since session 14 with LIBLINEAR 2.40's line search (its
trust-region variant stays there as ``method="trust_region"``).

Multi-class problems are one-vs-rest (``multi_class='ovr'``), one binary problem per class on threads, or
Crammer-Singer.  As in LIBLINEAR (and so scikit-learn), in a one-vs-rest problem the class weight multiplies
the C of the positive class only; the rest keep ``C * sample_weight``.

Added to scikit-learn's API: ``callback`` and ``time_limit`` (as the other maxmargin estimators),
``warm_start`` (start from the previous fit's dual variables, scaled by ``C_new / C_old`` for the
classifiers, or weights),
``shrinking``, ``n_jobs`` (threads for the one-vs-rest problems; for one binary problem of the dual solvers,
``n_jobs`` > 1 with ``random_state=None`` allows asynchronous epochs on large, high-dimensional sparse data --
see ``dual_cd.solve_svc`` and ``dual_cd.async_workers`` -- same ``tol``, not reproducible run to run; and
``n_jobs`` unset or > 1 lets one binary dual problem on long sparse rows split its features between two threads,
``solvers.dual_split``: reproducible, the same iterates as on one thread), and the fitted ``objective_`` (primal
objective per problem), ``duality_gap_`` (dual solvers; NaN otherwise), ``margin_`` (1/||w|| per problem,
intercept excluded), ``fit_status_`` and ``fit_time_``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import time
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model._base import LinearClassifierMixin, LinearModel, SparseCoefMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from . import _pages, dedup, labels
from ._ready import all_finite, canonical_csr, ready_xy
from ._threads import blas_serial_for, cores, one_blas_thread
from .callbacks import CallbackSupportMixin, report_of, reports_progress
from .solvers import cd_l1, cs_ipm, dual_cd, dual_ipm, dual_primal, tron
from .solvers._linear_common import linear_data, put_column, sqnorms
from .svm import sample_weights, warn_not_converged

__all__ = ["SOLVER_NAMES", "LinearSVC", "LinearSVR", "liblinear_solver_type"]

#: LIBLINEAR's solver numbers and names (the ones these estimators use)
SOLVER_NAMES = {
    1: "L2R_L2LOSS_SVC_DUAL",
    2: "L2R_L2LOSS_SVC",
    3: "L2R_L1LOSS_SVC_DUAL",
    4: "MCSVM_CS",
    5: "L1R_L2LOSS_SVC",
    11: "L2R_L2LOSS_SVR",
    12: "L2R_L2LOSS_SVR_DUAL",
    13: "L2R_L1LOSS_SVR_DUAL",
}

_SOLVERS = {
    "hinge": {"l2": {True: 3}},
    "squared_hinge": {"l1": {False: 5}, "l2": {False: 2, True: 1}},
    "epsilon_insensitive": {"l2": {True: 13}},
    "squared_epsilon_insensitive": {"l2": {False: 11, True: 12}},
}


def liblinear_solver_type(multi_class, penalty, loss, dual):
    """LIBLINEAR's solver number for the combination; ValueError (scikit-learn's message) where none exists."""
    if multi_class == "crammer_singer":
        return 4
    if multi_class != "ovr":
        raise ValueError(f"`multi_class` must be one of `ovr`, `crammer_singer`, got {multi_class!r}")
    by_penalty = _SOLVERS.get(loss)
    if by_penalty is None:
        why = f"loss='{loss}' is not supported"
    elif penalty not in by_penalty:
        why = f"The combination of penalty='{penalty}' and loss='{loss}' is not supported"
    elif dual not in by_penalty[penalty]:
        why = f"The combination of penalty='{penalty}' and loss='{loss}' are not supported when dual={dual}"
    else:
        return by_penalty[penalty][dual]
    raise ValueError(
        f"Unsupported set of arguments: {why}, Parameters: penalty={penalty!r}, loss={loss!r}, dual={dual!r}"
    )


def _resolve_dual(dual, multi_class, penalty, loss, X):
    if dual != "auto":
        return bool(dual)
    prefer = X.shape[0] < X.shape[1]
    try:
        liblinear_solver_type(multi_class, penalty, loss, prefer)
        return prefer
    except ValueError:
        return not prefer


def _positive_rows(sample_weight, X, target, sw):
    """``(X, target, sw)`` on the rows of positive weight: rows of weight 0 leave the problem (looked for only when
    ``sample_weight`` was given; ``sw`` its checked per-row weights)."""
    if sample_weight is None:
        return X, target, sw
    keep = np.flatnonzero(sw > 0)
    if keep.shape[0] == X.shape[0]:
        return X, target, sw
    return X[keep], target[keep], sw[keep]


def _plain_labels(classes):
    """Whether the sorted distinct labels are strings, integers or integer-valued finite floats (then they are
    class labels, as scikit-learn's ``check_classification_targets`` would find: for strings it finds the
    distinct values again, 1.8 ms on a9a's 32,561 rows, a quarter of the fit)."""
    if classes.dtype.kind in "iubUS":
        return True
    if classes.dtype == object:  # Python strings (a pandas column of text labels; the check sorts them again)
        return all(type(c) is str for c in classes)
    if classes.dtype.kind != "f":
        return False
    # a few labels as Python floats (NumPy's four calls took ~60 us of a 3.6 ms fit, caches cold); is_integer is False
    # for NaN and infinities
    if classes.shape[0] <= 64 and classes.dtype.itemsize <= 8:
        return all(c.is_integer() for c in classes.tolist())
    return bool(np.all(np.isfinite(classes)) and np.all(classes == np.round(classes)))


#: seeds are taken modulo this (``np.iinfo("i").max``, LIBLINEAR's ``int``; the lookup took ~20 us a fit, caches cold)
_INT_MAX = 2**31 - 1

#: the solvers whose only BLAS calls are dot products of a row or weight vector and the Newton method's direct
#: steps' Cholesky factor (LIBLINEAR's numbers: the squared hinge's dual and primal, the squared epsilon-insensitive
#: loss's primal and dual): where those run on one thread anyway, no hold (``_LinearSVMBase._blas_hold``).  The
#: others multiply matrices (the interior points, the L1 penalty's dense columns).
BLAS_VECTOR_SOLVERS = frozenset({1, 2, 11, 12})
#: the solvers that make the rows' squared norms (the dual coordinate descents, Crammer-Singer's): the estimators'
#: check of CSR values reads those (``_LinearSVMBase._check_values``)
SQNORM_SOLVERS = frozenset({1, 3, 4, 12, 13})
#: ``margin_`` of a binary model by ``np.dot`` up to this many features (one BLAS thread's size; einsum beyond)
ONE_NORM_DOT_MAX = 8192

#: integer CSR values of at most this magnitude are exact in float32
FLOAT32_EXACT = 1 << 24


def _float_values(X):
    """A CSR matrix of integer or boolean values (``CountVectorizer``'s int64 counts, 0/1 flags) with the same
    values as float32 where every one is exact in float32 (else float64), sharing the index arrays; anything else
    as it is.  The linear solvers store exact float32 values as float32 anyway (``linear_data``), and ``coef_`` is
    float64 whatever the input; scikit-learn's conversion made a float64 copy that was checked and copied again
    (1.1 against 0.4 ms on text2's 352k counts, a fifth of a 5 ms fit)."""
    if not sp.issparse(X) or X.format != "csr" or X.dtype.kind not in "biu" or len(X.shape) != 2:
        return X
    data = X.data
    exact = (
        data.dtype.kind == "b"
        or data.size == 0
        or (int(data.max()) <= FLOAT32_EXACT and int(data.min()) >= -FLOAT32_EXACT)
    )
    values = data.astype(np.float32 if exact else np.float64)
    return type(X)((values, X.indices, X.indptr), shape=X.shape)


#: parameter sets that passed scikit-learn's validation (:meth:`_LinearSVMBase._check_params`)
_VALID_PARAMS = set()
#: parameter values that count by value in the key of ``_VALID_PARAMS`` without an ABC check
_PLAIN_TYPES = frozenset({type(None), bool, int, float, str})

#: the dtypes the linear solvers take as they are (float32 stays float32)
_DTYPES = (np.float64, np.float32)


@functools.lru_cache(maxsize=None)
def _param_names(cls):
    """``cls``'s parameter names, sorted (``get_params`` reads them from the signature on every call: ~25 us)."""
    return tuple(sorted(cls._get_param_names()))


@functools.lru_cache(maxsize=None)
def _attr_params(cls):
    """Whether every parameter of ``cls`` is a plain instance attribute (no property: ``__dict__`` holds it)."""
    return not any(isinstance(getattr(cls, k, None), property) for k in _param_names(cls))


#: one-vs-rest problems go to threads where rows x problems reach this (4 classes, LinearSVC: 1,000 rows 1.34x
#: slower on two threads than one after the other, 2,500 rows 0.68x; iris 1.5x)
THREADS_MIN_WORK = 8000


#: identical training rows of one label are solved as one row of their summed weights (:mod:`maxmargin.dedup`) by
#: these solvers: the squared losses' dual epochs (LIBLINEAR's 1 and 12) ...
MERGING_SOLVERS = frozenset({1, 12})
#: ... and TRON (LIBLINEAR's 2, ``dual=False``, and so ``dual='auto'`` on more rows than features) where it solves at
#: least this many one-vs-rest problems on the same rows: the search for the groups is paid once for all of them.
#: Session 44, 200,000 rows of 6 one-hot questions (``datasets.survey``; 30% distinct), merged / unmerged: 3 classes
#: 0.88, 4 0.73, 6 0.57, 10 0.48; a binary problem 1.5x slower (categories: 15.6 -> 22.9 ms, the search 18 ms)
TRON_MERGE_MIN_PROBLEMS = 4
#: ... on at least this many rows (the sample's ~0.05-0.1 ms was 2-4% of the fits of 6,000 rows: mushrooms, text2,
#: abstracts, emptyrows; merging saves at most a few milliseconds there) ...
MERGE_MIN_ROWS = 10_000
#: ... where at most this share of a sample of the rows is distinct (``dedup.sampled_share``)
MERGE_SAMPLE_SHARE = 0.9


def _repeats(X, codes, sw, solver, n_problems=1):
    r"""The groups of identical rows of one label (``codes``: integers, equal where the labels are, or a callable
    giving them, called only where the rows may merge) to merge, or
    None (:data:`MERGING_SOLVERS`, :data:`MERGE_MIN_ROWS`, :data:`MERGE_SAMPLE_SHARE`, ``dedup.find``'s own limits).

    Merging is exact: rows with equal :math:`x_i` and :math:`y_i` have equal losses at every :math:`w`, so
    :math:`\sum_{i\in G} C_i\,\ell(w; x_i, y_i) = (\sum_{i\in G} C_i)\,\ell(w; x_G, y_G)` -- the same primal
    problem, with one dual variable a group.  Session 44 (``benchmarks/bench_linear.py skin categories``; 100,000
    pixels of 3 values 0-255, 29% distinct, and 200,000 rows of 8 one-hot fields, 27%): the squared hinge's dual
    0.27-0.42 of the time unmerged, LinearSVR's squared loss 0.24-0.37, objectives equal (within 2e-7) or lower.
    Not merged:

    * the L1 losses' duals (hinge, Crammer-Singer, epsilon-insensitive): their epochs took up to 5x more
      iterations on merged rows, and LinearSVR's stopping rule (relative to the first epoch's violations) ended
      26% above the unmerged objective;
    * rows without a nonzero value (the bias alone): each visit of such a row re-fits the bias, which every row
      shares, and 1,800 empty rows of 6,000 merged into two took the squared hinge's epochs from 14 to 54;
    * the primal solvers (TRON, the L1 penalty's coordinate descent) on one problem: their fits are short, and the
      search for the groups (``dedup.find``: 18 ms on the one-hot rows above) would be a large part of them; TRON
      merges for :data:`TRON_MERGE_MIN_PROBLEMS` one-vs-rest problems or more."""
    tron = solver == 2 and n_problems >= TRON_MERGE_MIN_PROBLEMS
    if not (solver in MERGING_SOLVERS or tron) or X.shape[0] < max(MERGE_MIN_ROWS, dedup.MIN_ROWS):
        return None
    codes = codes() if callable(codes) else codes
    if dedup.sampled_share(X, codes, empty_apart=True) > MERGE_SAMPLE_SHARE:
        return None
    return dedup.find(X, codes, np.ones(X.shape[0]) if sw is None else sw, mergeable=_stored_rows(X))


def _stored_rows(X):
    """Rows with a nonzero value (CSR: a stored one): only these merge (see :func:`_repeats`)."""
    if sp.issparse(X):
        return np.diff(X.indptr) > 0
    return np.any(X != 0, axis=1)


def _merged_dual(dual, dup):
    """Dual variables of the original rows as those of the merged problem: a group's sum (the warm start of a fit
    on merged rows)."""
    if dual is None or dup is None:
        return dual
    return np.bincount(dup.group, weights=np.asarray(dual, dtype=np.float64), minlength=dup.keep.shape[0])


def _split_dual(dual, dup, sw):
    """The merged problem's dual variables shared out over each group's rows in proportion to their weights
    ``sw`` (None: ones; within every row's own bound, as the group's bound is the sum of theirs); a solution of the original
    problem with the same ``w``."""
    if dual is None or dup is None:
        return dual
    return np.asarray(dual)[dup.group] * ((1.0 if sw is None else sw) / dup.C[dup.group])


class _LinearSVMBase(CallbackSupportMixin, BaseEstimator):
    """Validation, warm start and the solver calls shared by :class:`LinearSVC` and :class:`LinearSVR`.

    The solvers run with BLAS held to one thread (``one_blas_thread``): their work is compiled loops, and the
    few NumPy products on vectors (``w @ w`` of 50k features) woke OpenBLAS's threads, which then spun on the
    other core after each problem -- twice the CPU of LIBLINEAR on 100-class text (text100: 2.4 s of CPU for
    1.2 s of wall time), and a core taken from the one-vs-rest problems on the other thread.
    """

    #: fitted attributes a model file stores (see maxmargin.io.model)
    _state_attributes = (
        "coef_",
        "intercept_",
        "n_iter_",
        "objective_",
        "duality_gap_",
        "margin_",
        "fit_status_",
        "fit_time_",
        "solver_type_",
    )

    #: not a parameter: what reports (the command line) show as the kernel
    kernel = "linear"

    _extra_constraints: ClassVar[dict] = {
        "shrinking": ["boolean"],
        "warm_start": ["boolean"],
        "callback": [None, callable],
        "time_limit": [None, Interval(numbers.Real, 0.0, None, closed="neither")],
        "n_jobs": [None, Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_params(self):
        # scikit-learn's validation costs ~0.85 ms, a sixth of a fit on mushrooms: skipped for parameters that
        # passed it before (in any estimator of this class: scikit-learn's clones and a new estimator a fit are the
        # rule).  Numbers and strings count by value, other objects (dicts, callables) by type, which is all their
        # constraints look at.
        cls = type(self)
        names = _param_names(cls)
        values = tuple(map(self.__dict__.get, names)) if _attr_params(cls) else tuple(getattr(self, k) for k in names)
        kinds = tuple(map(type, values))
        if _PLAIN_TYPES.issuperset(kinds):  # (three C calls for the usual parameters: ~20 us less with cold caches)
            key = (cls, values, kinds)
        else:
            key = [cls]
            for k, v, t in zip(names, values, kinds):
                # (the exact types first: the ABC check on every parameter took ~4 us of a 0.1 ms fit)
                plain = t in _PLAIN_TYPES or isinstance(v, (numbers.Number, str))
                key.append((k, t, v if plain else None))
            key = tuple(key)
        if key not in _VALID_PARAMS:
            self._validate_params()
            if len(_VALID_PARAMS) >= 256:
                _VALID_PARAMS.clear()
            _VALID_PARAMS.add(key)
        if self.fit_intercept and self.intercept_scaling <= 0:  # pragma: no cover - the constraint catches it
            raise ValueError(
                f"Intercept scaling is {self.intercept_scaling!r} but needs to be greater than 0. "
                "To disable fitting an intercept, set fit_intercept=False."
            )

    def _validate_train(self, X, y, y_numeric):
        """``(X, y, unchecked)``: the data as the solvers take them; ``unchecked``: a CSR matrix whose stored values
        are still to be found finite (:meth:`_check_values`, once the solver's data are made)."""
        X = _float_values(X)
        # validate_data's answer, ~0.15-0.5 ms sooner; a CSR matrix's values are checked later, in a pass made anyway
        ready = ready_xy(self, X, y, _DTYPES, large_sparse=True, csr_values=False)
        X, y = ready if ready is not None else self._validated(X, y, y_numeric)
        # rows in any order (the split epochs partition a copy)
        return canonical_csr(X, sorted_rows=False), y, ready is not None and sp.issparse(X)

    def _validated(self, X, y, y_numeric):
        return validate_data(
            self,
            X,
            y,
            accept_sparse="csr",
            dtype=list(_DTYPES),
            order="C",
            accept_large_sparse=True,
            y_numeric=y_numeric,
        )

    def _check_values(self, ld, X, solver, given, n_features_before):
        r"""That the stored values of the CSR training data are finite, where :meth:`_validate_train` left them
        unchecked, by a pass the fit makes anyway: 0/1 data (``ld.unit``) are all ones; for the dual solvers
        (:data:`SQNORM_SOLVERS`) the rows' squared norms :math:`\|x_i\|^2`, which they need and keep
        (``_linear_common.sqnorms``), are finite exactly where the values are (a NaN or infinity makes its row's sum
        NaN or infinite; only a value beyond ~1e154 overflows there, and then the values themselves are looked at);
        otherwise the values are looked at.  Non-finite values: the estimator as it was before the fit, and
        scikit-learn's error (``given``: the ``(X, y, y_numeric)`` the fit was given).  Session 70: LinearSVR's dual on
        20,000 text rows (1.3M values) 1.1 ms of a 24 ms fit saved, LinearSVC's primal on mushrooms ~3%.
        ``ld`` None: ``X`` itself (the L1 penalty's columns)."""
        if ld is not None and ld.unit:
            return
        if ld is not None and solver in SQNORM_SOLVERS and all_finite(sqnorms(ld)):
            return
        if all_finite(X.data if ld is None else ld.data):  # (CSR data: never dense rows here)
            return
        if n_features_before is None:
            self.__dict__.pop("n_features_in_", None)
        else:
            self.n_features_in_ = n_features_before
        self._validated(*given)  # (raises scikit-learn's error for the values)
        raise ValueError("Input X contains NaN or infinity.")  # pragma: no cover - validate_data raised

    _sample_weights = staticmethod(sample_weights)

    @staticmethod
    def _blas_hold(solver, n_rows, n_weights):
        """:func:`~maxmargin._threads.one_blas_thread`, or no hold where the solver's only BLAS calls (the dual CD
        and Newton solvers, :data:`BLAS_VECTOR_SOLVERS`: dot products of ``n_rows`` or ``n_weights`` values, the
        direct steps' Cholesky factor of ``n_weights`` rows) run on one thread anyway
        (:func:`~maxmargin._threads.blas_serial_for`): the hold cost ~3% of a 2.5 ms fit on mushrooms."""
        m = int(n_weights)
        if solver in BLAS_VECTOR_SOLVERS and blas_serial_for(
            max(int(n_rows), m), m if m <= tron.DIRECT_MAX_WEIGHTS else 0
        ):
            return contextlib.nullcontext()
        return one_blas_thread()

    def _bias(self):
        return float(self.intercept_scaling) if self.fit_intercept else -1.0

    def _seed(self):
        rs = self.random_state
        if isinstance(rs, numbers.Integral) and not isinstance(rs, bool):  # no RandomState to build (~0.1 ms)
            return int(rs) % _INT_MAX
        return int(check_random_state(rs).randint(_INT_MAX))

    def _options(self, p_no, n_problems):
        opts = {"tol": float(self.tol), "max_iter": int(self.max_iter), "verbose": bool(self.verbose)}
        if self.time_limit is not None:
            opts["time_limit"] = float(self.time_limit)
        report = report_of(self)
        if n_problems == 1:
            report.begin(1, steps=True)
        callback = report.solver_callback(p_no)  # callback=, scikit-learn's callbacks, watchers
        if callback is not None:
            opts["callback"] = callback
            opts["callback_info"] = {"subproblem": p_no, "n_subproblems": n_problems}
        return opts

    def _warm(self, key, n):
        """The previous fit's per-problem (dual, w, C) when ``warm_start`` and the fit is comparable."""
        if not self.warm_start:
            return None
        prev = getattr(self, "_warm_state", None)
        if prev is None or prev["key"] != key or prev["n"] != n:
            return None
        return prev

    def _run_problems(self, jobs, threads):
        """Run the callables ``jobs`` (one per problem), on threads where allowed; a callback stop ends the rest."""
        report = report_of(self)
        if len(jobs) > 1:
            report.begin(len(jobs))
            jobs = [self._reported(report, p, job, threads == 1) for p, job in enumerate(jobs)]
        if threads > 1 and len(jobs) > 1:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                return list(pool.map(lambda job: job(), jobs))
        fits = []
        for job in jobs:
            fit = job()
            fits.append(fit)
            if fit.status == "callback":
                break
        return fits

    @staticmethod
    def _reported(report, p_no, job, steps):
        def run():
            report.problem_begin(p_no, steps=steps)
            fit = job()
            report.problem_end(p_no)
            return fit

        return run

    def _threads(self, n_problems, n_rows=None):
        if n_problems < 2 or self.callback is not None or self.verbose:
            return 1
        if n_rows is not None and n_rows * n_problems < THREADS_MIN_WORK:
            return 1  # a thread pool for problems this small costs more than it saves
        limit = cores() if self.n_jobs is None else int(self.n_jobs)
        return max(1, min(limit, n_problems))

    def _async_threads(self, n_problems):
        """Threads offered to one binary dual CD problem (see ``dual_cd.solve_svc``): ``n_jobs`` when the user
        asked for more than one and left ``random_state`` unset (the asynchronous epochs are not reproducible),
        else 1."""
        if n_problems != 1 or self.n_jobs is None or self.n_jobs <= 1 or self.random_state is not None:
            return 1
        return int(self.n_jobs)

    def _split_threads(self, n_problems):
        """Threads offered to one binary dual CD problem for the split epochs (``dual_split``: reproducible, so
        seeded fits use them too): ``n_jobs`` for a single problem, else 1.  Unset: 2, which only says "threads
        allowed" -- ``dual_split.worth_splitting`` asks for the cores this thread may use
        (:func:`~maxmargin._threads.cores`) itself, where the rows may qualify, and the objective's parallel pass
        runs on Numba's threads, however many; asking here cost ~15-20 us of every such fit with cold caches
        (session 70)."""
        if n_problems != 1:
            return 1
        return 2 if self.n_jobs is None else int(self.n_jobs)

    def _finish(self, fits, nf, bias, t_start, stacked=None):
        if len(fits) == 1 and np.ndim(fits[0].w) == 1:
            # a binary problem: coef_ a view of the fit's own w (fresh from every solver; the warm state holds it
            # too, and every warm start copies it).  Stacking copied it: 8 MB and its page faults at 1M features.
            W = fits[0].w.reshape(1, -1)
        elif len(fits) == 1 and np.ndim(fits[0].w) == 2:
            # Crammer-Singer's weights, a Fortran-ordered view of its feature-major array: coef_ keeps that order,
            # so no copy (stacking made a C-ordered copy and coef_ then a Fortran-ordered one: ~25 ms of a 220 ms
            # fit at 20 classes of 130,000 features).  Its warm start reads the dual variables only.
            W = fits[0].w
        elif stacked is not None:
            W = stacked  # one-vs-rest problems' weights written side by side as they ended (rows: a transpose)
        else:
            W = np.vstack([np.atleast_2d(f.w) for f in fits])
        coef = W[:, :nf]
        self.n_iter_ = int(max(f.n_iter for f in fits))
        self.objective_ = np.array([f.objective for f in fits])
        self.duality_gap_ = np.array([np.nan if f.gap is None else f.gap for f in fits])
        if stacked is not None:  # (summed as each problem's weights were placed)
            norms = np.sqrt(np.array([f.sqnorm for f in fits]))
        elif len(fits) == 1 and getattr(fits[0], "class_sqnorms", None) is not None:
            # Crammer-Singer's, summed with its objective over the weights the data can make nonzero (an einsum
            # over every weight took 1.3 s of a 6.3 s fit at 200 x 2**20, faulting in pages nobody wrote)
            norms = np.sqrt(np.maximum(fits[0].class_sqnorms, 0.0))
        elif coef.flags.f_contiguous and not coef.flags.c_contiguous:  # (Crammer-Singer's feature-major weights)
            # along the rows of the feature-major array: its contiguous order (the rows of coef strided: 2.3-3.4 s
            # against 0.07 s for 200 x 2**20 weights)
            norms = np.sqrt(np.einsum("ji,ji->i", coef.T, coef.T))
        elif coef.shape[0] == 1 and coef.shape[1] <= ONE_NORM_DOT_MAX:
            norms = None  # (one row: np.dot below; einsum parses its subscripts, ~48 us with cold caches)
        else:
            norms = np.sqrt(np.einsum("ij,ij->i", coef, coef))
        if norms is None or norms.shape[0] == 1:  # (Python's arithmetic for one norm: NumPy's three calls ~20 us)
            norm = math.sqrt(float(np.dot(coef[0], coef[0]))) if norms is None else float(norms[0])
            self.margin_ = np.array([1.0 / max(norm, 1e-300) if norm > 0 else np.inf])
        else:
            self.margin_ = np.where(norms > 0, 1.0 / np.maximum(norms, 1e-300), np.inf)  # (no division by 0)
        self.fit_status_ = 0 if all(f.converged for f in fits) else 1
        warn_not_converged(self.tol, fits, stacklevel=4)
        intercept = bias * W[:, nf] if bias > 0 else None
        self.fit_time_ = time.perf_counter() - t_start
        return coef, intercept


class LinearSVC(LinearClassifierMixin, SparseCoefMixin, _LinearSVMBase):
    """Linear support vector classification (LIBLINEAR's models, compiled solvers).

    Parameters as ``sklearn.svm.LinearSVC`` plus ``shrinking``, ``warm_start``, ``callback``, ``time_limit`` and
    ``n_jobs``; see the module docstring for the objectives and solvers.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) for two classes, (n_classes, n_features) otherwise
    intercept_ : ndarray of shape (1,) or (n_classes,), or 0.0 without ``fit_intercept``
    classes_, n_features_in_, n_iter_ (the largest over the problems)
    objective_, duality_gap_, margin_ : ndarray, one value per binary problem (one for Crammer-Singer)
    solver_type_ : int, LIBLINEAR's solver number
    fit_status_ : 0 when every problem converged, 1 otherwise
    """

    _parameter_constraints: ClassVar[dict] = {
        "penalty": [StrOptions({"l1", "l2"})],
        "loss": [StrOptions({"hinge", "squared_hinge"})],
        "dual": ["boolean", StrOptions({"auto"})],
        "tol": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "C": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "multi_class": [StrOptions({"ovr", "crammer_singer"})],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(numbers.Real, 0, None, closed="neither")],
        "class_weight": [None, dict, StrOptions({"balanced"})],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "max_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        **_LinearSVMBase._extra_constraints,
    }

    _state_attributes = ("classes_",) + _LinearSVMBase._state_attributes

    def __init__(
        self,
        penalty="l2",
        loss="squared_hinge",
        *,
        dual="auto",
        tol=1e-4,
        C=1.0,
        multi_class="ovr",
        fit_intercept=True,
        intercept_scaling=1,
        class_weight=None,
        verbose=0,
        random_state=None,
        max_iter=1000,
        shrinking=True,
        warm_start=False,
        callback=None,
        time_limit=None,
        n_jobs=None,
    ):
        self.penalty = penalty
        self.loss = loss
        self.dual = dual
        self.tol = tol
        self.C = C
        self.multi_class = multi_class
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.verbose = verbose
        self.random_state = random_state
        self.max_iter = max_iter
        self.shrinking = shrinking
        self.warm_start = warm_start
        self.callback = callback
        self.time_limit = time_limit
        self.n_jobs = n_jobs

    @reports_progress
    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (dense or CSR; float32 stays float32) and labels ``y``."""
        self._check_params()
        t_start = time.perf_counter()
        given, n_features_before = (X, y, False), self.__dict__.get("n_features_in_")
        X, y, unchecked = self._validate_train(X, y, y_numeric=False)
        classes, y_idx = labels.encode(y)
        if not _plain_labels(classes):  # string or integer-valued labels need no further check (~0.15-1.8 ms a fit)
            check_classification_targets(y)
        if classes.shape[0] < 2:
            raise ValueError(
                "This solver needs samples of at least 2 classes in the data, but the data contains only one "
                f"class: {classes[0]!r}"
            )
        dual = _resolve_dual(self.dual, self.multi_class, self.penalty, self.loss, X)
        solver = liblinear_solver_type(self.multi_class, self.penalty, self.loss, dual)
        # (None for no weights: the solvers' costs are made without a vector of ones, ~15-50 us with cold caches)
        sw = None if sample_weight is None else self._sample_weights(sample_weight, X)
        cw = labels.class_weights(self.class_weight, classes, y, y_idx, sw)
        bias = self._bias()
        n_rows = X.shape[0]
        X, y_idx, sw = _positive_rows(sample_weight, X, y_idx, sw)
        n_kept = X.shape[0]
        if n_kept < n_rows and np.unique(y_idx).shape[0] < 2:
            raise ValueError("after removing samples of zero weight, fewer than 2 classes are left")
        n, nf = X.shape
        k = classes.shape[0]
        seed = self._seed()
        warm = self._warm((solver, tuple(classes.tolist()), bias, n_kept), n)
        ratio = self.C / warm["C"] if warm is not None else 1.0
        C = float(self.C)
        # identical rows of one class as one row of their summed weights (exact; _repeats)
        dup = _repeats(X, y_idx, sw, solver, 1 if k == 2 else k)
        sw_rows = sw
        if dup is not None:
            X, y_idx, sw = X[dup.keep], y_idx[dup.keep], dup.C

        stack = None  # (one-vs-rest: the problems' weights side by side, feature-major)
        if solver == 4:
            ld = linear_data(X, bias)
            if unchecked:
                self._check_values(ld, X, solver, given, n_features_before)
            alpha0 = warm["dual"][0] * ratio if warm is not None else None  # (Crammer-Singer never merges)
            with one_blas_thread():
                costs = C * cw[y_idx] if sw is None else C * sw * cw[y_idx]
                fits = [cs_ipm.solve(ld, y_idx, k, costs, seed=seed, alpha0=alpha0, **self._options(0, 1))]
        else:
            targets = [1] if k == 2 else list(range(k))
            # the coordinate-descent solvers take thin dense data as CSR (CD_CSR_MAX_FEATURES); TRON keeps dense
            ld = linear_data(X, bias, rows_first=solver in (1, 3)) if solver != 5 else None
            dense_ld = None if sp.issparse(X) or solver != 1 else (lambda: linear_data(X, bias))
            cols = None
            if solver == 5:  # (a single problem on dense rows: cd_l1.solve scales its columns from X in one pass)
                cols = (cd_l1.fused_columns(X, bias) if len(targets) == 1 else None) or cd_l1.to_columns(X, bias)
            if unchecked:
                self._check_values(ld, X, solver, given, n_features_before)
            fused = cols is not None and cd_l1.is_fused(cols)
            threads = self._threads(len(targets), X.shape[0])
            fold = "shared" if len(targets) > 1 else True  # (the dual CD's fold of one-row features; dual_cd.solve_svc)

            def job(p_no, m):
                yb, Ci = labels.one_vs_rest(y_idx, m, C, sw, cw)
                opts = self._options(p_no, len(targets))
                prev_dual = warm["dual"][p_no] * ratio if warm is not None and warm["dual"][p_no] is not None else None
                prev_dual = _merged_dual(prev_dual, dup)
                prev_w = warm["w"][p_no] if warm is not None else None
                s = seed + 7919 * p_no
                if solver == 1:  # LIBLINEAR's -s 1: the dual, then the primal Newton method if it stalls
                    return dual_primal.l2_svc(
                        ld,
                        yb,
                        Ci,
                        parallel=threads == 1,
                        shrinking=self.shrinking,
                        seed=s,
                        alpha0=prev_dual,
                        n_threads=self._async_threads(len(targets)),
                        split_threads=self._split_threads(len(targets)),
                        primal_data=dense_ld,
                        fold=fold,
                        concurrent=threads > 1,
                        **opts,
                    )
                if solver == 3:  # LIBLINEAR's -s 3: the dual, then the interior point if it stalls
                    return dual_ipm.l1_svc(
                        ld,
                        yb,
                        Ci,
                        shrinking=self.shrinking,
                        seed=s,
                        alpha0=prev_dual,
                        n_threads=self._async_threads(len(targets)),
                        split_threads=self._split_threads(len(targets)),
                        fold=fold,
                        concurrent=threads > 1,
                        **opts,
                    )
                if solver == 2:  # LIBLINEAR's -s 2: the Newton method, the dual CD where it gets stuck
                    return dual_primal.newton_then_dual(
                        ld,
                        yb,
                        Ci,
                        "squared_hinge",
                        w0=prev_w,
                        parallel=threads == 1,
                        seed=s,
                        shrinking=self.shrinking,
                        **opts,
                    )
                return cd_l1.solve(
                    X if fused else None,
                    bias,
                    yb,
                    Ci,
                    shrinking=self.shrinking,
                    seed=s,
                    w0=prev_w,
                    columns=cols,
                    **opts,
                )

            # one-vs-rest: each problem's weights go into its column of one zeroed feature-major array as it
            # ends (coef_ its transpose, Fortran-ordered), and the problem's own vector is dropped.  Stacking the
            # vectors and then making coef_ Fortran-ordered kept three copies (session 60, 200 classes of 2**20
            # features: 4.8 GB at the peak, 7.4 s of a 16.6 s fit); the zeroed array takes its pages as written
            # (huge pages where the system allows: maxmargin._pages).
            stack = _pages.zeros((nf + (1 if bias > 0 else 0), len(targets))) if len(targets) > 1 else None

            def placed(p, m):
                fit = job(p, m)
                if stack is not None:
                    fit.sqnorm = put_column(np.ascontiguousarray(fit.w, dtype=np.float64), stack, p, nf)
                    fit.w = stack[:, p]
                return fit

            jobs = [(lambda p=p, m=m: placed(p, m)) for p, m in enumerate(targets)]
            # see _LinearSVMBase: BLAS threads would only spin beside the solvers
            with self._blas_hold(solver, n, nf + (1 if bias > 0 else 0)):
                fits = self._run_problems(jobs, threads)
            if len(fits) < len(targets):  # a callback stopped the fit: the remaining problems keep zero weights
                for p in range(len(fits), len(targets)):
                    w0 = np.zeros(nf + (1 if bias > 0 else 0)) if stack is None else stack[:, p]
                    fits.append(dual_cd.LinearFit(w0, None, np.nan, None, 0, np.inf, "callback"))
                    fits[-1].sqnorm = 0.0

        self._warm_state = {
            "key": (solver, tuple(classes.tolist()), bias, n_kept),
            "n": n,
            "C": C,
            "dual": [_split_dual(f.dual, dup, sw_rows) for f in fits],
            "w": [f.w for f in fits],
        }
        self.classes_ = classes
        self.solver_type_ = int(solver)
        coef, intercept = self._finish(fits, nf, bias, t_start, None if stack is None else stack.T)
        if solver == 4 and k == 2:  # one decision function, as scikit-learn
            coef = (coef[1] - coef[0]).reshape(1, -1)
            if intercept is not None:
                intercept = np.array([intercept[1] - intercept[0]])
        # Fortran order, as scikit-learn's: its decision function takes X @ coef_.T, which for CSR rows wants
        # coef_.T in C order (else a copy on every call: 24 MB, ~10% of predicting 20,000 rows, for 100
        # classes of 30,000 features)
        self.coef_ = np.asfortranarray(coef)
        self.intercept_ = intercept if intercept is not None else 0.0
        return self

    def __getstate__(self):
        state = super().__getstate__()
        if isinstance(state, dict):
            state = dict(state)
            state.pop("_warm_state", None)  # dual variables of the last fit (n_samples per problem)
        return state


class LinearSVR(RegressorMixin, LinearModel, _LinearSVMBase):
    """Linear support vector regression (LIBLINEAR's models, compiled solvers).

    Parameters as ``sklearn.svm.LinearSVR`` plus ``shrinking``, ``warm_start``, ``callback``, ``time_limit`` and
    ``n_jobs`` (unused: one problem); see the module docstring.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : ndarray of shape (1,), or 0.0 without ``fit_intercept``
    n_features_in_, n_iter_, objective_, duality_gap_, margin_, solver_type_, fit_status_
    """

    _parameter_constraints: ClassVar[dict] = {
        "epsilon": [numbers.Real],
        "tol": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "C": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "loss": [StrOptions({"epsilon_insensitive", "squared_epsilon_insensitive"})],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(numbers.Real, 0, None, closed="neither")],
        "dual": ["boolean", StrOptions({"auto"})],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "max_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        **_LinearSVMBase._extra_constraints,
    }

    def __init__(
        self,
        *,
        epsilon=0.0,
        tol=1e-4,
        C=1.0,
        loss="epsilon_insensitive",
        fit_intercept=True,
        intercept_scaling=1.0,
        dual="auto",
        verbose=0,
        random_state=None,
        max_iter=1000,
        shrinking=True,
        warm_start=False,
        callback=None,
        time_limit=None,
        n_jobs=None,
    ):
        self.epsilon = epsilon
        self.tol = tol
        self.C = C
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.dual = dual
        self.verbose = verbose
        self.random_state = random_state
        self.max_iter = max_iter
        self.shrinking = shrinking
        self.warm_start = warm_start
        self.callback = callback
        self.time_limit = time_limit
        self.n_jobs = n_jobs

    @reports_progress
    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (dense or CSR; float32 stays float32) and targets ``y``."""
        self._check_params()
        t_start = time.perf_counter()
        given, n_features_before = (X, y, True), self.__dict__.get("n_features_in_")
        X, y, unchecked = self._validate_train(X, y, y_numeric=True)
        y = np.asarray(y, dtype=np.float64)
        dual = _resolve_dual(self.dual, "ovr", "l2", self.loss, X)
        solver = liblinear_solver_type("ovr", "l2", self.loss, dual)
        sw = None if sample_weight is None else self._sample_weights(sample_weight, X)
        X, y, sw = _positive_rows(sample_weight, X, y, sw)
        n_kept = X.shape[0]
        if X.shape[0] == 0:
            raise ValueError("every sample has zero weight")
        n, nf = X.shape
        bias = self._bias()
        # identical rows of one target as one row of their summed weights (exact; _repeats): the targets' bits as
        # their codes (-0.0 as 0.0)
        dup = _repeats(X, lambda: np.ascontiguousarray(y + 0.0).view(np.int64), sw, solver)
        sw_rows = sw
        if dup is not None:
            X, y, sw = X[dup.keep], y[dup.keep], dup.C
        ld = linear_data(X, bias, rows_first=solver in (12, 13))  # see LinearSVC.fit
        if unchecked:
            self._check_values(ld, X, solver, given, n_features_before)
        dense_ld = None if sp.issparse(X) or solver != 12 else (lambda: linear_data(X, bias))
        Ci = np.full(X.shape[0], float(self.C)) if sw is None else float(self.C) * sw
        warm = self._warm((solver, bias, n_kept), n)
        opts = self._options(0, 1)
        if warm is not None and dup is not None:
            warm = dict(warm, dual=_merged_dual(warm["dual"], dup))
        with self._blas_hold(solver, X.shape[0], nf + (1 if bias > 0 else 0)):  # see _LinearSVMBase
            fit = self._solve(solver, ld, y, Ci, warm, opts, dense_ld)
        self._warm_state = {
            "key": (solver, bias, n_kept),
            "n": n,
            "C": float(self.C),
            "dual": _split_dual(fit.dual, dup, sw_rows),
            "w": fit.w,
        }
        self.solver_type_ = int(solver)
        coef, intercept = self._finish([fit], nf, bias, t_start)
        self.coef_ = np.ascontiguousarray(coef[0])
        self.intercept_ = intercept if intercept is not None else 0.0
        return self

    def _solve(self, solver, ld, y, Ci, warm, opts, dense_ld=None):
        if solver == 11:  # the Newton method, the dual CD where it gets stuck (dual_primal.newton_then_dual)
            return dual_primal.newton_then_dual(
                ld,
                y,
                Ci,
                "squared_epsilon_insensitive",
                float(self.epsilon),
                w0=None if warm is None else warm["w"],
                seed=self._seed(),
                shrinking=self.shrinking,
                **opts,
            )
        # the previous beta as it is (clipped into the new box): scaling by C_new / C_old, as for the
        # classifiers, measured no better for regression, where most beta sit at a bound or at zero
        beta0 = None if warm is None or warm["dual"] is None else warm["dual"]
        svr_options = dict(
            shrinking=self.shrinking, seed=self._seed(), beta0=beta0, split_threads=self._split_threads(1), **opts
        )
        if solver == 12:  # LIBLINEAR's -s 12: the dual, then the primal Newton method if it stalls
            return dual_primal.l2_svr(ld, y, Ci, float(self.epsilon), primal_data=dense_ld, **svr_options)
        return dual_ipm.l1_svr(ld, y, Ci, float(self.epsilon), **svr_options)

    def __getstate__(self):
        state = super().__getstate__()
        if isinstance(state, dict):
            state = dict(state)
            state.pop("_warm_state", None)
        return state
