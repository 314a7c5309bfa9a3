r"""Progress and stopping during a fit: one path for every watcher.

Three kinds of watcher follow a fit, and all of them go through the :class:`FitReport`
that the fit opens:

* scikit-learn's callbacks (``sklearn.callback``, scikit-learn >= 1.9):
  ``est.set_callbacks(ProgressBar(), ScoringMonitor(...))``.  Every maxmargin estimator
  has :class:`CallbackSupportMixin` in its bases and its ``fit`` is wrapped by
  :func:`reports_progress`; callbacks set on a ``GridSearchCV`` or ``Pipeline`` reach
  the estimators inside as they reach scikit-learn's own.
* the estimators' ``callback=`` parameter (called every chunk of solver iterations with
  a dict, see docs/CONTRACTS.md; returning False stops the solver);
* watchers registered with :func:`watching` (the command line's progress line): they get
  the same dicts as ``callback=`` plus one dict per finished sub-problem, and, unlike
  ``callback=``, they leave the fast routes (compiled one-vs-one batches, pairs on
  threads) in place.

The task tree a fit reports (``CallbackContext`` names)::

    fit                                    root (estimator's name)
      pair #p      (classifiers, one-vs-one; LinearSVC: one-vs-rest problem #p)
        kkt-step #s                        s = 0..STEPS-1, see below
      probability                          (probability=True)
        pair #p                            one 5-fold cross-validation per pair
    fit                                    (SVR, NuSVR, OneClassSVM, LinearSVR: one problem)
      kkt-step #s

Progress inside one problem: SMO and the other iterative solvers stop when the KKT
violation :math:`v` falls to ``tol``; from the first reported violation :math:`v_0`,

.. math::  \phi = \frac{\log(v_0 / v)}{\log(v_0 / \mathrm{tol})} \in [0, 1]

is the part of the way done on a log scale (the violation falls roughly geometrically
once SMO has found the support vectors).  Step ``s`` ends when the largest :math:`\phi`
seen so far reaches :math:`(s+1)/\mathrm{STEPS}`; whatever is left ends with the problem.
A problem solved in one compiled call (one-vs-one batches, pairs on threads) reports
only its end: its ``pair`` task is a leaf.

A callback's ``on_fit_task_end`` returning True stops the running solver at its next
chunk (the model is usable, as with ``callback=`` returning False).

``sklearn.callback`` is experimental and new in scikit-learn 1.9; with an older
scikit-learn maxmargin works as before and ``set_callbacks`` raises an ImportError
that says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import threading
import time
from contextlib import contextmanager

try:  # experimental in scikit-learn 1.9; absent before
    from sklearn.callback import CallbackSupportMixin as _SklearnMixin
    from sklearn.callback._callback_support import callback_management_context as _management
except ImportError:  # pragma: no cover - scikit-learn < 1.9
    _SklearnMixin = None
    _management = None

#: whether scikit-learn's callback API (``sklearn.callback``) is available
HAVE_SKLEARN_CALLBACKS = _SklearnMixin is not None
#: steps of the progress of one problem (see the module docstring)
STEPS = 10

_watchers = contextvars.ContextVar("maxmargin_progress_watchers", default=())


if HAVE_SKLEARN_CALLBACKS:

    class CallbackSupportMixin(_SklearnMixin):
        """scikit-learn's :class:`sklearn.callback.CallbackSupportMixin` (``set_callbacks``)."""

else:  # pragma: no cover - scikit-learn < 1.9

    class CallbackSupportMixin:
        """Stand-in where scikit-learn has no ``sklearn.callback`` (before 1.9)."""

        def set_callbacks(self, *callbacks):
            import sklearn

            raise ImportError(
                f"set_callbacks needs scikit-learn >= 1.9 (its sklearn.callback module); scikit-learn "
                f"{sklearn.__version__} is installed. The callback= parameter works with any version."
            )


@contextmanager
def watching(fn):
    """While active (in this thread or task), every fit started calls ``fn(info)``.

    ``info`` is the dict of ``callback=`` (every chunk of solver iterations) or, when a
    sub-problem ends, ``{'done': k, 'subproblem': p, 'n_subproblems': n, 'elapsed': t}``
    (k sub-problems finished so far).  Returning False stops the fit as ``callback=``
    does.  Unlike ``callback=``, a watcher keeps the fast routes.
    """
    token = _watchers.set(_watchers.get() + (fn,))
    try:
        yield fn
    finally:
        _watchers.reset(token)


def reports_progress(fit):
    """Decorator for an estimator's ``fit(X, y=None, sample_weight=None)``: opens the
    :class:`FitReport` (``self._fit_report``) and manages scikit-learn's callbacks
    (their ``teardown`` runs whatever happens, as ``sklearn.callback.with_callbacks``)."""

    @functools.wraps(fit)
    def wrapper(self, X, y=None, sample_weight=None, **kwargs):
        if _unwatched(self):  # (nothing to report to: the shared no-op report, no callback management)
            self._fit_report = _QUIET
            try:
                return fit(self, X, y, sample_weight=sample_weight, **kwargs)
            finally:
                self.__dict__.pop("_fit_report", None)
        report = FitReport(self, X, y, sample_weight)
        self._fit_report = report
        manage = _management(self) if _management is not None else contextlib.nullcontext()
        with manage:
            try:
                out = fit(self, X, y, sample_weight=sample_weight, **kwargs)
                report.finish()
            finally:
                self.__dict__.pop("_fit_report", None)
        return out

    return wrapper


def _unwatched(estimator):
    """Whether nothing watches a fit of ``estimator``: no ``callback=``, no :func:`watching` watcher and no
    scikit-learn callbacks set on it."""
    return (
        getattr(estimator, "callback", None) is None
        and not _watchers.get()
        and not (HAVE_SKLEARN_CALLBACKS and getattr(estimator, "_skl_callbacks", None))
    )


class _QuietReport:
    """The :class:`FitReport` of a fit nothing watches (:func:`_unwatched`): every call does nothing, and one
    instance serves every such fit -- a FitReport and scikit-learn's callback management cost ~40-60 us a fit with
    cold caches, ~2% of a 2.5 ms ``LinearSVC`` fit (session 70)."""

    active = False
    sklearn = False
    stopped = False
    root = None

    def begin(self, n_problems, probability=False, steps=False):
        pass

    def problem_begin(self, p_no, steps=True):
        pass

    def problem_end(self, p_no):
        return True

    def batch_done(self, p_numbers):
        return True

    def solver_callback(self, p_no=0):
        return None

    def finish(self):
        pass

    def probability_begin(self, n_pairs):
        pass

    def probability_pair_done(self, p_no):
        pass

    def probability_end(self):
        pass


_QUIET = _QuietReport()


def report_of(estimator):
    """The fit's :class:`FitReport`; outside :func:`reports_progress` (a subclass's own ``fit``)
    a report that serves ``callback=`` and the watchers but not scikit-learn's callbacks."""
    report = getattr(estimator, "_fit_report", None)
    if report is None:
        report = FitReport(estimator)
        report.sklearn = False
    return report


class FitReport:
    """Where a fit reports its tasks; see the module docstring.

    The estimator calls :meth:`begin` once it knows its sub-problems, then
    :meth:`problem_begin` / :meth:`problem_end` per sub-problem (or :meth:`batch_done`
    for sub-problems solved together), and gives each solver :meth:`solver_callback`.
    Safe to call from several threads.
    """

    def __init__(self, estimator, X=None, y=None, sample_weight=None):
        self.estimator = estimator
        self.X, self.y = X, y
        self.metadata = None if sample_weight is None else {"sample_weight": sample_weight}
        self.legacy = getattr(estimator, "callback", None)
        self.watchers = _watchers.get()
        self.sklearn = HAVE_SKLEARN_CALLBACKS and bool(getattr(estimator, "_skl_callbacks", None))
        self.stopped = False
        self.root = None
        self.n_problems = 0
        self.done = 0
        self._open = {}  # problem number -> its open _Task
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._prob = None
        self._single = False
        self._begun = False

    # ---------------------------------------------------------------- what watches
    @property
    def active(self):
        """Whether anything watches this fit."""
        return self.sklearn or self.legacy is not None or bool(self.watchers)

    # ------------------------------------------------------------------- the tree
    def begin(self, n_problems, probability=False, steps=False):
        """Open the root task: ``n_problems`` sub-problem tasks (``pair`` tasks), plus a
        ``probability`` task; with ``steps=True`` (one problem) the root's children are that
        problem's kkt-steps instead."""
        if self._begun:
            return
        self._begun = True
        self.n_problems = n_problems
        self._single = steps
        if not self.sklearn:
            return
        est = self.estimator
        n_sub = STEPS if steps else n_problems + (1 if probability else 0)
        self.root = est._init_callback_context(max_subtasks=n_sub, sequential_subtasks=False)
        self.root.call_on_fit_task_begin(estimator=est, X=self.X, y=self.y, metadata=self.metadata)
        if steps:
            self._open[0] = self._task(self.root, True)

    def problem_begin(self, p_no, steps=True):
        """Sub-problem ``p_no`` starts (``steps``: its solver reports chunks)."""
        if self.root is None or self._single:
            return
        with self._lock:
            ctx = self.root.subcontext(
                task_name="pair", task_id=p_no, max_subtasks=STEPS if steps else 0, sequential_subtasks=False
            )
            ctx.call_on_fit_task_begin(estimator=self.estimator)
            self._open[p_no] = self._task(ctx, steps)

    def problem_end(self, p_no):
        """Sub-problem ``p_no`` is solved; returns False when a watcher asks to stop."""
        with self._lock:
            self.done += 1
            task = None if self._single else self._open.pop(p_no, None)
            if task is not None:
                self._steps_to(task, STEPS)
                if task.ctx.call_on_fit_task_end(estimator=self.estimator):
                    self.stopped = True
            if self.watchers:
                info = {
                    "done": self.done,
                    "subproblem": p_no,
                    "n_subproblems": self.n_problems,
                    "elapsed": time.perf_counter() - self._t0,
                }
                if self._tell_watchers(info) is False:
                    self.stopped = True
        return not self.stopped

    def batch_done(self, p_numbers):
        """Sub-problems solved together in one compiled call; returns False to stop."""
        for p in p_numbers:
            self.problem_begin(p, steps=False)
            self.problem_end(p)
        return not self.stopped

    def solver_callback(self, p_no=0):
        """The ``callback`` to give the solver of sub-problem ``p_no``, or None.

        It forwards the dict to ``callback=`` and the watchers, ends the kkt-steps
        reached, and returns False when any of them asks to stop."""
        if not self.active:
            return None

        def cb(info):
            stop = False
            if self.legacy is not None and self.legacy(info) is False:
                stop = True
            with self._lock:
                if self.watchers and self._tell_watchers(info) is False:
                    stop = True
                task = self._open.get(p_no)
                if task is not None and task.has_steps:
                    self._advance(task, info)
                if self.stopped:
                    stop = True
            return False if stop else None

        return cb

    def finish(self):
        """End the open tasks and the root (scikit-learn's ScoringMonitor scores the fitted estimator here)."""
        if self.root is None:
            return
        if self._single:
            task = self._open.pop(0, None)
            if task is not None:
                self._steps_to(task, STEPS)
        for p in list(self._open):
            self.problem_end(p)
        if self._prob is not None:
            self._prob[0].call_on_fit_task_end(estimator=self.estimator)
            self._prob = None
        self.root.call_on_fit_task_end(
            estimator=self.estimator, X=self.X, y=self.y, metadata=self.metadata, reconstruction_attributes={}
        )
        self.root = None

    # ------------------------------------------------------------- probability
    def probability_begin(self, n_pairs):
        if self.root is None:
            return
        ctx = self.root.subcontext(
            task_name="probability", task_id=self.n_problems, max_subtasks=n_pairs, sequential_subtasks=False
        )
        ctx.call_on_fit_task_begin(estimator=self.estimator)
        self._prob = [ctx, 0]

    def probability_pair_done(self, p_no):
        if self._prob is None:
            return
        with self._lock:
            sub = self._prob[0].subcontext(task_name="pair", task_id=p_no)
            sub.call_on_fit_task_begin(estimator=self.estimator)
            if sub.call_on_fit_task_end(estimator=self.estimator):
                self.stopped = True

    def probability_end(self):
        if self._prob is not None:
            self._prob[0].call_on_fit_task_end(estimator=self.estimator)
            self._prob = None

    # ----------------------------------------------------------------- internals
    def _tell_watchers(self, info):
        out = None
        for fn in self.watchers:
            if fn(info) is False:
                out = False
        return out

    def _task(self, ctx, has_steps):
        task = _Task(ctx, has_steps)
        if has_steps:
            self._step_begin(task)
        return task

    def _step_begin(self, task):
        task.step = task.ctx.subcontext(task_name="kkt-step", task_id=task.ended)
        task.step.call_on_fit_task_begin(estimator=self.estimator)

    def _steps_to(self, task, target):
        """End kkt-steps until ``target`` of them have ended (the next one begins unless all have)."""
        if not task.has_steps:
            return
        while task.ended < min(target, STEPS):
            if task.step.call_on_fit_task_end(estimator=self.estimator):
                self.stopped = True
            task.ended += 1
            if task.ended < STEPS:
                self._step_begin(task)

    def _advance(self, task, info):
        viol, tol = info.get("violation"), info.get("tol")
        if viol is None or tol is None:
            return
        viol, tol = float(viol), float(tol)
        if task.first is None:
            task.first = viol
        first = task.first
        if not (math.isfinite(viol) and math.isfinite(first) and first > tol > 0 and viol > 0):
            return
        frac = min(max(math.log(first / viol) / math.log(first / tol), 0.0), 1.0)
        self._steps_to(task, int(frac * STEPS))


class _Task:
    """An open task: its context, kkt-steps ended, first violation seen, the running step."""

    __slots__ = ("ctx", "has_steps", "ended", "first", "step")

    def __init__(self, ctx, has_steps):
        self.ctx, self.has_steps = ctx, has_steps
        self.ended, self.first, self.step = 0, None, None
