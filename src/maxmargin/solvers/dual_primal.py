r"""Squared-loss linear SVMs: dual coordinate descent, then the primal Newton method where it stalls.

LIBLINEAR (from version 2.42) runs its dual solvers for the squared losses (``-s 1``, ``-s 12``) for at most
300 epochs; when they have not met ``tol`` by then, it continues with the primal trust-region Newton method
(``-s 2``, ``-s 11``) started from the dual's :math:`w`.  Dual coordinate descent converges slowly where
:math:`\bar Q` is badly conditioned -- unscaled dense features, large ``C`` -- and one epoch costs as much as
a Hessian-vector product, so a few Newton steps replace hundreds of epochs.  The functions here do the same:

* :func:`l2_svc` -- :func:`~maxmargin.solvers.dual_cd.solve_svc` (squared hinge) for at most
  ``dual_epochs`` epochs, then :func:`~maxmargin.solvers.tron.solve` from its ``w`` to
  LIBLINEAR's primal stopping rule with ``0.1 * tol`` (LIBLINEAR: "the tolerance obtained from the dual's may be
  too loose").
* :func:`l2_svr` -- :func:`~maxmargin.solvers.dual_cd.solve_svr` (squared epsilon-insensitive), then TRON with
  ``0.001 * tol``, as LIBLINEAR.

Unlike LIBLINEAR, the switch may come before the cap: a :class:`StallWatch` follows the dual's stopping measure
and switches as soon as the epochs will evidently not meet ``tol`` within ``dual_epochs`` (session 38: the
epochs that LIBLINEAR spends there are most of its fit on such data; breast cancer 0.85 -> 0.24 of LIBLINEAR's
time, a dense set of unscaled columns 0.35 -> 0.08, letter26 0.24 -> 0.06).  For the squared losses it also switches
where the epochs would meet ``tol`` within the cap but their extrapolated rest (on the rows shrinking left) costs
more than ``SWITCH_PASSES`` (25) passes over every row, and TRON's stopping rule bounds its objective within
``AHEAD_BOUND`` times the objective at the switch (session 43: a9a 0.54, sparse40k 0.58, TF-IDF with dense columns
0.62, 200,000 x 20 dense rows 0.39 of the time, objectives equal or lower; ``_newton_bound``; LinearSVR's
squared loss on 100,000 x 50 Gaussian rows 0.23, on 200,000 x 20 rows 0.56).  That switch may come from
epoch ``AHEAD_FIRST`` (10) on, past ``AHEAD_PASSES`` (15) passes and where the bound is within
``EARLY_AHEAD_SHARE`` of it (session 50, against the switch at epoch 50 or none: ijcnn1's 35 epochs 0.70 of the
time, a9a 0.46, 40,000 x 300 one-hot rows 0.41, LinearSVR's squared loss on 100,000 x 50 rows 0.24); the switch
where the epochs would not converge waits for epoch ``STALL_FIRST`` (50).  Both pass counts are those at ``tol``
0.1 and grow by :data:`PASSES_PER_DECADE` of themselves for each tenfold tighter ``tol`` (:func:`newton_passes`,
session 53: the Newton method's own tolerance tightens with it).
After such an early switch TRON
runs to ``EARLY_TOL_FACTOR`` (0.1) times the tolerance above: it starts from a less converged ``w``, and at
``0.1 * tol`` alone its objectives were up to 7% above those of the dual run to ``tol`` on problems where the
dual converges late (5,000 x 2,000 dense rows, converged at epoch 284).
The switch where the epochs would converge prices the Newton method by passes, whatever the data's conditioning,
and that price can be far off (rows whose norms spread over four orders of magnitude: 27 times the epochs' work).
So the Newton method there gets a budget, :data:`BAIL_SHARE` times the epochs left times the values of the rows
with a nonzero dual variable (where the epochs' shrinking ends up), counted as
:func:`~maxmargin.solvers.tron.iteration_work` prices its iterations; past it, the epochs resume, unwatched, from
the dual variables of the Newton method's point or of the switch, whichever has the higher dual objective
(:func:`squared_dual`), and where they then reach the cap, the Newton method runs from their ``w`` as after any
switch at the cap.

After a switch the dual variables are recovered from the primal optimality conditions,

.. math:: \alpha_i = 2 C_i \max(0, 1 - y_i w\cdot x_i) \quad\text{(classification)},\qquad
          \beta_i = 2 C_i \operatorname{sign}(r_i) \max(0, |r_i| - \epsilon),\ r_i = y_i - w\cdot x_i
          \quad\text{(regression)},

and kept as ``dual`` (the warm start of the next fit along a C path).  No dual objective is reported after a
switch (``dual_objective`` None, so the estimators' ``duality_gap_`` is NaN, as for TRON): on the badly
conditioned problems that need the switch, these variables of a primal point that meets the gradient test
give a dual objective far below the primal one, a gap that says nothing about the primal solution's quality.

The epoch cap applies only when ``max_iter`` is larger than ``dual_epochs``: a user who asks for fewer
iterations gets the dual solver alone, stopped there.  ``max_iter`` then also bounds the Newton iterations.
``n_iter`` of the result counts both (epochs plus Newton iterations) and ``switched`` says whether the
primal phase ran.
"""

from __future__ import annotations

import bisect
import time

import numpy as np

from . import dual_cd, tron
from ._linear_common import ROW_VALUES as ROW_VALUES  # (its home before session 61)
from ._linear_common import all_dots, pass_values, row_values, weighted_sum
from .tron import recover_dual, squared_dual

#: LIBLINEAR's ``dual_solver_max_iter``: epochs of the dual solver before the switch
DUAL_EPOCHS = 300
#: :class:`StallWatch` looks at the dual's progress every STALL_EVERY epochs from STALL_FIRST on
STALL_EVERY = 10
STALL_FIRST = 50
#: the squared losses' watch (:func:`_dual_then_primal`) looks every AHEAD_EVERY epochs, and from AHEAD_FIRST on it
#: may switch where the epochs would converge but cost more than the Newton method (the switch where they would not
#: still waits for STALL_FIRST: a violation that falls slowly at first often falls faster later).  Session 50
#: (``/tmp/s50/sw2.py``, whole ``LinearSVC`` fits, looks from 10 against from 50): ijcnn1 (35 epochs) 0.70, a9a
#: 0.54, sparse40k 0.41, textmeta 0.56, tall200k 0.44, skin 0.47, categories 0.57, imbal100k 0.76, letter26 0.35,
#: mid64 0.31; sets that converge in 8-22 epochs (the text sets, mnist, emb128) 0.94-1.05, not switched.
AHEAD_FIRST = 10
AHEAD_EVERY = 5
#: ... on data whose epoch holds at least this many values (stored values plus :data:`ROW_VALUES` a row): a look costs
#: ~10 us of Python, and the finer looks took digits (1,797 x 64, ten one-vs-rest problems of ~4 us epochs) and
#: breast cancer 1.06-1.10x the time with no switch
AHEAD_MIN_VALUES = 200_000
#: the primal method's ``tol`` after an early switch, times the one after a switch at the cap
EARLY_TOL_FACTOR = 0.1
#: the squared losses: the watch also switches where the dual would meet ``tol`` within the cap, but after more epochs
#: (on the rows still active) than this many passes over every row -- what the Newton method costs from there.
#: Session 43, TF-IDF text with six dense metadata columns (6,000 x 30,006; ``datasets.textmeta``): the dual
#: converged at epoch 143 (57 ms, 0.4 ms an epoch at first); TRON from the epochs' ``w`` took 16-49
#: Hessian-vector products of ~0.4 ms each (to ``tol`` 0.01-0.001), 12-19 ms from any epoch of 0-50.
SWITCH_PASSES = 25
#: ... before STALL_FIRST (the looks from :data:`AHEAD_FIRST`, session 50): 25 kept ijcnn1's 35 epochs (extrapolated
#: at epoch 10: ~20 more on most rows) where TRON from there took 0.70 of the time.  From STALL_FIRST on 15 would
#: switch 5,000 x 2,000 dense rows at epoch 55 (1.4% above the epochs' objective), so the later looks keep 25.
AHEAD_PASSES = 15
#: both pass counts are those at ``tol`` 0.1 (LIBLINEAR's default); each tenfold tighter ``tol`` adds this share of
#: them (:func:`newton_passes`): the Newton method runs to a tighter tolerance, and its conjugate-gradient steps
#: grow.  Session 53 (``/tmp/s53/trace3.py``, TRON's time from an epoch-10 switch in epochs of the dual): TF-IDF with
#: dense columns (``datasets.textmeta``) 32, 53, 62, 72 epochs at ``tol`` 0.1, 0.01, 0.001, 1e-4; ijcnn1 7.0 / 9.4
#: / 9.8 at 0.01 / 0.001 / 1e-4; text with 30% empty rows (``datasets.emptyrows``) 27.5 at 1e-4, where the fixed 15
#: switched at 17.2 passes: 9.8 ms against the epochs' 8.0 (scikit-learn's default ``tol`` is 1e-4).
PASSES_PER_DECADE = 0.3
#: ... where the Newton method's stopping rule bounds its objective's distance from the optimum by at most this
#: times the objective at the switch (:func:`_newton_bound`; else the epochs go on).  The bound is a worst
#: case: where it was 0.01-0.22 of the objective (a9a, sparse40k, textmeta, categories, clicks, 200,000 x 20 dense
#: rows), the switched objectives were within 1e-6 to 1e-4 of the dual run to ``tol``, or below it; on 5,000 x
#: 2,000 dense rows (``datasets.dense2k``) it was 27 times the objective, and the switch ended 1.7% above
#: LIBLINEAR's (0.1 times the ``tol`` there: 1% below, but 2.2 s against the epochs' 0.74): not switched.
AHEAD_BOUND = 1.0
#: ... and before STALL_FIRST (the looks from :data:`AHEAD_FIRST`) at most this share of :data:`AHEAD_BOUND`.
#: Session 50, the bound at the first such look, as a share of the objective there: ijcnn1 0.003, a9a 0.010,
#: textmeta 7e-5, sparse40k 0.007, categories 0.016, imbal100k 0.001 (switched there: objectives within 1.2e-5 of
#: the epochs', below LIBLINEAR's), but 5,000 x 2,000 dense rows 0.26, whose switch at epoch 25 ended 7.5% above
#: the epochs' objective (200,000 x 20 dense rows 0.17, clicks 0.12 and letter26's classes 0.12-0.46 ended within
#: 1.1e-4 of it: they keep the switch at STALL_FIRST they had).
EARLY_AHEAD_SHARE = 0.05
#: ... and the Newton method after such a switch (where the epochs would converge) gets at most this many times the
#: epochs' predicted work -- the epochs left times the values of the rows with a nonzero dual variable at the switch
#: -- in the values its passes visit (:func:`~maxmargin.solvers.tron.iteration_work`); past it the epochs resume
#: (module docstring).  Session 61 (``/tmp/s61/pred.py``, ``ab.py``): the switch's price of the Newton method
#: (passes, whatever the conditioning) was 60 times off where rows' norms spread over four orders of magnitude
#: (``datasets.normspread``: 143 Newton iterations, 4,254 products; 7.9 s -> 3.4 s with the budget, the epochs
#: alone 2.4 s).  The switches that paid measured 0.09-1.08 of the work at tol 0.1 and up to 1.99 at 1e-4 (a9a;
#: ijcnn1 1.14, textmeta 0.85); those that lost at 1e-4 2.8-4.7 (mixedlen, heavyc, clicks: 4.3 -> 3.1 s).
BAIL_SHARE = 2.5
#: ... but on small data the looks come every so many epochs that a chunk between two looks holds at least this
#: much work (stored values, plus :data:`ROW_VALUES` a row): a look costs a few microseconds of Python, an epoch
#: over iris' 150 rows ~1.5 us.  Session 40, ``LinearSVC(loss='hinge')`` on iris (scaled; ~850 epochs to tol):
#: 4.5 ms (scikit-learn 1.4), of which the looks every 10 epochs took most (each one also scanned every earlier
#: look; now :func:`bisect`); 1.5 ms with the cheaper look, 0.8 with one every 30 epochs.  Breast cancer and
#: 200 x 20 rows keep a look every 10 epochs: their switch to the interior point at epoch 50 is where their time
#: goes.  The chunking does not change the iterates, only the epochs at which the watch may decide.
LOOK_VALUES = 50_000


def epoch_values(ld):
    """The work of one epoch over data ``ld``: stored values plus :data:`ROW_VALUES` a row."""
    return pass_values(ld)


def newton_passes(passes, tol):
    """What the Newton method costs after a switch, in passes over every row: ``passes`` at ``tol`` 0.1, and
    :data:`PASSES_PER_DECADE` more of them for each tenfold tighter ``tol``."""
    return passes * (1.0 + PASSES_PER_DECADE * max(0.0, float(np.log10(0.1 / float(tol)))))


def look_every(ld):
    """The epochs between two looks of a :class:`StallWatch` on data ``ld``: :data:`STALL_EVERY`, or a multiple of it
    where an epoch holds less than a tenth of :data:`LOOK_VALUES`."""
    return STALL_EVERY * max(1, -(-LOOK_VALUES // (STALL_EVERY * epoch_values(ld))))


class StallWatch:
    r"""Whether the dual epochs will use up their ``budget`` (``dual_epochs``) before they meet ``tol``; if so,
    the switch to the primal Newton method comes now instead of after ``budget`` epochs.

    LIBLINEAR switches only at its cap of 300 epochs.  On the problems that reach it -- unscaled dense features,
    large ``C``, small data that are far from separable -- the violation usually stops falling after a few
    dozen epochs, and the rest of the 300 change little; session 38 (``/tmp/s38/trace.py``, violation at epochs
    10 / 50 / 300): breast cancer's unscaled columns 5.6 / 5.6 / 5.9, a dense 60,000 x 54 set with columns of
    scale 1-3,000 9.6 / 10 / 9.5 (its dual fit 1.2 s, the primal 18 ms), 200 x 20 random rows 6.4 / 4.5 / 0.74,
    against ``tol`` = 0.1.

    The rule: every :data:`STALL_EVERY` epochs the epochs stop for a look at ``measure()`` = (violation, target[,
    active rows[, more]]) (the solver's stopping test is violation <= target; ``more``: the solver's own, for its
    ``worth``).  At epoch :math:`t \ge` :data:`STALL_FIRST`,
    with :math:`v_1` the least violation seen in epochs :math:`(t/2, t]` and :math:`v_0` the least in
    :math:`(t/4, t/2]`, the violation fell by :math:`\rho = \ln(v_0/v_1)/(t/2)` per epoch (linear convergence,
    as coordinate descent has), so it meets the target after about :math:`\ln(v_1/\text{target})/\rho` more;
    when :math:`v_1 \ge v_0`, or :math:`t` plus that exceeds ``budget``, the watch says stop.  The least values
    of windows, because with shrinking an epoch's violation is measured on the rows still active and jumps
    when they all come back.  With ``worth(t, active, epochs, converging)`` given, the watch says stop where that
    says the switch costs less than the ``epochs`` still to run (``converging``: the extrapolated count, where the
    epochs would meet the target within ``budget``; else what is left of it), with ``active`` rows left by
    shrinking (the third value of ``measure()``, where it gives one; else None).  No look before epoch 50: the
    violation often falls slowly at first and faster later (5,000 x 2,000 dense rows: 5.3, 5.2, 3.1, 1.1, 0.19 at
    epochs 10, 20, 50, 100, 200; converged at 284), and a look at epoch 20 switched there.  The primal method then
    runs to a tighter tolerance (:data:`EARLY_TOL_FACTOR`), so that a wrong guess costs time rather than accuracy.
    Chunks of :data:`STALL_EVERY` epochs run the same iterates as one call (the epoch state lives in the arrays).

    With ``worth``, ``ahead_first`` and ``ahead_every`` given (the squared losses, :data:`AHEAD_FIRST`), the watch
    also looks every ``ahead_every`` epochs before ``first``, and from ``ahead_first`` on those looks may stop epochs
    that *would* converge (where ``worth`` says so; never ones that would not).  Their history is kept apart: from
    ``first`` on the looks, their windows and so their decisions are those of the watch without them."""

    def __init__(self, measure, budget, every=None, first=None, worth=None, ahead_first=None, ahead_every=None):
        self.measure, self.budget, self.worth = measure, int(budget), worth
        self.every = int(STALL_EVERY if every is None else every)
        self.first = int(STALL_FIRST if first is None else first)
        # with worth given, looks every ahead_every epochs from ahead_first / 4 up to first may cut converging
        # epochs short from ahead_first on; from first on the looks and their history are the plain ones
        early = worth is not None and ahead_first is not None and int(ahead_first) < self.first
        self.ahead_first = int(ahead_first) if early else self.first
        self.ahead_every = int(ahead_every or self.every) if early else self.every
        # looks before epoch (ahead_first / 4) would not count (the older window starts there): one chunk up to it
        self.start = -(-self.ahead_first // 4 // self.ahead_every) * self.ahead_every
        self.epochs, self.values = [], []  # the plain looks' epochs (ascending) and violations
        self.fine_epochs, self.fine_values = [], []  # every look before first
        self.epoch = 0

    def _grid(self, t):
        """The epochs between looks at epoch ``t``."""
        return self.ahead_every if t < self.first else self.every

    def stalled(self):
        """Look at the solver's state after epoch ``self.epoch``: True when it should stop (see the class)."""
        t = self.epoch
        value, target, *active = self.measure()
        if t % self.every == 0:
            self.epochs.append(t)
            self.values.append(float(value))
        if t < self.first:
            self.fine_epochs.append(t)
            self.fine_values.append(float(value))
        if t < self.ahead_first or t >= self.budget or not value > target > 0.0:
            return False  # (at the budget the cap stops the epochs: LIBLINEAR's switch, its primal tol)
        epochs, values = (self.fine_epochs, self.fine_values) if t < self.first else (self.epochs, self.values)
        quarter = bisect.bisect_right(epochs, t / 4)
        half = bisect.bisect_right(epochs, t / 2)
        if half == quarter:
            return False  # no look in (t/4, t/2]
        v1 = min(values[half:])
        v0 = min(values[quarter:half])
        left, converging = self.budget - t, False
        if v1 < v0:
            # (a look that found no violation at all: converging, at no rate one can take a logarithm of -- a
            # ZeroDivisionError until session 70, Crammer-Singer on repeated 0/1 rows, half the seeds)
            needed = 0.0 if v1 <= 0.0 else np.log(v1 / target) / (np.log(v0 / v1) / (t / 2))
            if t + needed <= self.budget:
                if self.worth is None:
                    return False
                left, converging = needed, True
        if t < self.first and not converging:
            return False  # before first only converging epochs may be cut short
        return self.worth is None or bool(self.worth(t, int(active[0]) if active else None, float(left), converging))

    def wrap(self, step):
        """``step(k)`` run in chunks that end on every look's epoch; code 2 when stalled."""

        def watched(k):
            left = int(k)
            code, it = 1, self.epoch
            while left > 0:
                grid = self._grid(self.epoch)
                piece = min(left, max(grid - self.epoch % grid, self.start - self.epoch))
                code, it = step(piece)
                left -= int(it) - self.epoch
                moved = int(it) != self.epoch
                self.epoch = int(it)
                if code == 0 or not moved:
                    return code, it
                if self.epoch % self._grid(self.epoch - 1) == 0 and self.stalled():
                    return 2, it
            return code, it

        return watched


def _remaining(time_limit, t0):
    if time_limit is None:
        return None
    return max(float(time_limit) - (time.perf_counter() - t0), 0.0)


def _newton_bound(ld, y, C, tol, epsilon=None):
    r"""How far TRON to ``tol`` may end from the optimum at most: it stops at :math:`\|\nabla f(w)\| \le
    \epsilon_t \|\nabla f(0)\|` (``tron.solve``'s rule; :math:`\epsilon_t` = ``tol``, for the squared hinge times
    the smaller class's share), and :math:`f` is 1-strongly convex, so :math:`f(w) - f^* \le \|\nabla f(w)\|^2 / 2`.
    :math:`\nabla f(0)` is :math:`-2\sum_i C_i y_i \hat x_i` for the squared hinge (every row has margin 0 there),
    and :math:`-2\sum_i C_i\,\mathrm{sign}(y_i)\max(0, |y_i| - \epsilon)\,\hat x_i` for the squared
    epsilon-insensitive loss (``epsilon`` not None).  One pass over the data."""
    n = max(y.shape[0], 1)
    C = np.asarray(C, dtype=np.float64)
    if epsilon is None:
        pos = int(np.sum(y > 0))
        coef = 2.0 * C * y
        eps = float(tol) * max(min(pos, n - pos), 1) / n
    else:
        coef = 2.0 * C * np.sign(y) * np.maximum(np.abs(y) - float(epsilon), 0.0)
        eps = float(tol)
    g0 = np.zeros(ld.n_weights)
    weighted_sum(coef, g0, *ld.args())
    return 0.5 * (eps * float(np.linalg.norm(g0))) ** 2


def _dual_then_primal(dual_solve, ld, y, C, kind, epsilon, tol, tol_factor, recover, options):
    r"""Run ``dual_solve(max_iter=cap, **watch)`` (the dual for at most ``dual_epochs`` epochs); if it stopped on
    that cap while ``max_iter`` allows more, TRON from its ``w`` at ``tol_factor * tol``, and the dual variables
    from ``recover(r)`` with the residuals :math:`r_i = y_i - w\cdot x_i`.  ``options``: ``max_iter``,
    ``dual_epochs``, ``parallel``, ``verbose``, ``primal_data`` (None, or a callable giving the
    :class:`~maxmargin.solvers._linear_common.LinearData` TRON runs on, where its layout differs) and the watch
    (``callback``, ``callback_info``, ``time_limit``).
    Returns a :class:`~maxmargin.solvers.dual_cd.LinearFit` with ``switched`` set."""
    t0 = time.perf_counter()
    max_iter, dual_epochs = int(options["max_iter"]), int(options["dual_epochs"])
    watch = {k: options[k] for k in ("callback", "callback_info", "time_limit")}
    # a user who asks for fewer iterations than the cap gets the dual alone (module docstring), so no early switch
    stall = None
    ahead = {}  # whether the switch may come where the epochs would converge (decided once before / from STALL_FIRST)
    bound = []  # TRON's bound on its distance from the optimum (_newton_bound), computed once
    budget = []  # after a switch where the epochs would converge: the Newton method's work budget (BAIL_SHARE)
    if max_iter > dual_epochs and options["stall"]:
        worth = None
        if kind in ("squared_hinge", "squared_epsilon_insensitive"):
            n = max(ld.n_samples, 1)
            loss_eps = None if kind == "squared_hinge" else float(epsilon)

            def worth(t, active, epochs, converging):
                # converging too: where the epochs still to run (on the rows shrinking left) cost more than the
                # Newton method's passes over every row, and its stopping rule pins the objective down (checked
                # once before STALL_FIRST, with EARLY_AHEAD_SHARE, and once from there: the primal objective at the
                # first such look, a fourth value of the solver's measure; the bound's pass made once)
                if not converging:
                    return True
                late = t >= STALL_FIRST
                passes = newton_passes(SWITCH_PASSES if late else AHEAD_PASSES, tol)
                if late in ahead or epochs * (n if active is None else active) <= passes * n:
                    return False
                primal = watches[0].measure()[3]()
                if not bound:
                    bound.append(_newton_bound(ld, y, C, tol_factor * float(tol) * EARLY_TOL_FACTOR, loss_eps))
                share = 1.0 if late else EARLY_AHEAD_SHARE
                ahead[late] = bound[0] <= share * AHEAD_BOUND * float(primal)
                if ahead[late]:  # the epochs left: they price the Newton method's budget (BAIL_SHARE)
                    budget.append(epochs)
                return ahead[late]

        watches = []

        def stall(measure):
            every = look_every(ld)  # the finer looks before STALL_FIRST on a grid that holds the plain one's
            fine = dict(ahead_first=AHEAD_FIRST, ahead_every=max(every * AHEAD_EVERY // STALL_EVERY, 1))
            early = worth is not None and epoch_values(ld) >= AHEAD_MIN_VALUES
            watches.append(StallWatch(measure, dual_epochs, every=every, worth=worth, **(fine if early else {})))
            return watches[-1]

    cap = min(max_iter, dual_epochs)
    fit = dual_solve(max_iter=cap, stall=stall, **watch)
    if stall is not None:
        # worth -> watches -> the watch -> worth: a reference cycle that kept the solver's data (the fold's
        # arrays, 66 MB on bigrams) alive until the next garbage collection
        watches.clear()
    fit.switched = False
    if not (fit.status in ("max_iter", "stalled") and max_iter > dual_epochs):
        return fit
    if options.get("primal_data") is not None:
        ld = options["primal_data"]()
    early = fit.status == "stalled"
    work_budget = None
    if early and budget and fit.dual is not None:
        work_budget = BAIL_SHARE * budget[-1] * float(np.dot(row_values(ld), fit.dual != 0.0))
    primal = _newton(
        ld,
        y,
        C,
        kind,
        epsilon,
        tol_factor * float(tol) * (EARLY_TOL_FACTOR if early else 1.0),
        max_iter,
        fit.w,
        work_budget,
        watch,
        t0,
        options,
    )
    epochs = fit.n_iter
    status = primal.status
    if primal.status == "stalled":
        # over budget (or stuck: tron.DONE_STUCK): the epochs resume, unwatched, from the dual variables of the
        # Newton method's point
        r = np.asarray(y, dtype=np.float64) - all_dots(primal.w, *ld.args())
        start = recover(r)  # or the switch's, where the Newton method's point is worse for the dual
        eps = None if kind == "squared_hinge" else epsilon
        if fit.dual_objective is not None and squared_dual(ld, y, C, start, eps) < fit.dual_objective:
            start = fit.dual
        more = dual_solve(
            max_iter=max(cap - epochs, 1),
            stall=None,
            alpha0=start,
            **{**watch, "time_limit": _remaining(watch["time_limit"], t0)},
        )
        newton_iters = primal.n_iter
        epochs += more.n_iter
        if not (more.status == "max_iter" and epochs >= cap):
            if more.objective <= primal.objective:
                more.n_iter += fit.n_iter + newton_iters
                more.switched = False
                more.async_workers = getattr(fit, "async_workers", 1)
                return more
            # else the Newton point is the better (kept below), as in newton_then_dual: converged where the epochs
            # met tol (they stop by a violation rule, not at the optimum: session 72, a planted regression on
            # 30,000 rows of log counts at tol 0.1 -- the Newton point 1584.5, 0.07% above the optimum, the resumed
            # epochs converged at 2042.5, LIBLINEAR's -s 12 at 1736.2), else not converged
            if more.status not in ("max_iter", "stalled"):
                status = more.status
        else:
            # the cap reached after all: LIBLINEAR's switch, at its tolerance
            primal = _newton(
                ld, y, C, kind, epsilon, tol_factor * float(tol), max_iter, more.w, None, watch, t0, options
            )
            primal.n_iter += newton_iters
            status = primal.status
    r = np.asarray(y, dtype=np.float64) - all_dots(primal.w, *ld.args())
    out = dual_cd.LinearFit(
        primal.w, recover(r), primal.objective, None, epochs + primal.n_iter, primal.violation, status
    )
    out.switched = True
    out.async_workers = getattr(fit, "async_workers", 1)
    return out


def _newton(ld, y, C, kind, epsilon, tol, max_iter, w0, work_budget, watch, t0, options):
    """TRON from ``w0`` (see :func:`_dual_then_primal`)."""
    return tron.solve(
        ld,
        y,
        C,
        kind=kind,
        epsilon=float(epsilon),
        tol=tol,
        max_iter=max_iter,
        w0=w0,
        parallel=options["parallel"],
        callback=watch["callback"],
        callback_info=watch["callback_info"],
        time_limit=_remaining(watch["time_limit"], t0),
        verbose=options["verbose"],
        work_budget=work_budget,
    )


def newton_then_dual(ld, y, C, kind, epsilon=0.0, *, w0=None, parallel=True, seed=0, shrinking=True, **options):
    r"""The primal Newton method (:func:`~maxmargin.solvers.tron.solve`, LIBLINEAR's ``-s 2`` / ``-s 11``), and
    where it gets stuck before its gradient rule holds (status ``"stalled"``:
    :data:`~maxmargin.solvers.tron.DONE_STUCK`), the dual coordinate descent from the dual variables of its point
    (the recovery above), at the same ``tol``, for the rest of ``max_iter``.  The Newton step ignores rows at the
    hinge's kink, whose curvature on badly scaled data (features of size ~400, ``C`` = 10: :math:`2C_i x^2 \sim
    10^7`) stops every step length; coordinate descent moves one multiplier at a time along the exact piecewise
    quadratic.  Where the epochs do not converge either, the better point of the two by the primal objective is the
    result (status not converged).  ``options``: ``tol``, ``max_iter`` and the watch (``callback``,
    ``callback_info``, ``time_limit``, ``verbose``).  The result's ``n_iter`` counts the Newton iterations and the
    epochs; ``switched`` says whether the result is the epochs'."""
    t0 = time.perf_counter()
    fit = tron.solve(ld, y, C, kind=kind, epsilon=float(epsilon), w0=w0, parallel=parallel, **options)
    fit.switched = False
    if fit.status != "stalled":
        return fit
    yy = np.asarray(y, dtype=np.float64)
    CC = np.asarray(C, dtype=np.float64)
    r = yy - all_dots(fit.w, *ld.args())
    rest = {**options, "max_iter": max(int(options.get("max_iter", 1000)) - fit.n_iter, 1)}
    rest["time_limit"] = _remaining(options.get("time_limit"), t0)
    if kind == "squared_hinge":
        start = recover_dual(yy, CC, r)
        more = dual_cd.solve_svc(ld, yy, CC, squared=True, alpha0=start, seed=seed, shrinking=shrinking, **rest)
    else:
        start = recover_dual(yy, CC, r, float(epsilon))
        more = dual_cd.solve_svr(
            ld, yy, CC, float(epsilon), squared=True, beta0=start, seed=seed, shrinking=shrinking, **rest
        )
    more.n_iter += fit.n_iter
    more.switched = True
    if more.objective <= fit.objective:
        return more
    # the epochs ended above the Newton point (their primal objective is not monotone; rows ~2**24 in size: 0.333
    # at the Newton point, 231-89,232 after the epochs): the Newton point, converged where the epochs met tol (they
    # stop by a violation rule, not at the optimum; see _dual_then_primal), else not converged
    fit.n_iter = more.n_iter
    if more.converged:
        fit.status = more.status
        fit.converged = True
    return fit


def l2_svc(
    ld,
    y,
    C,
    *,
    tol=0.1,
    max_iter=1000,
    dual_epochs=DUAL_EPOCHS,
    parallel=True,
    callback=None,
    callback_info=None,
    time_limit=None,
    primal_data=None,
    stall=True,
    **dual_options,
):
    """Squared-hinge classification: dual CD, then TRON if the dual used up ``dual_epochs`` or stalled before
    (``stall``: let a :class:`StallWatch` decide; module docstring).  ``dual_options`` go to
    :func:`~maxmargin.solvers.dual_cd.solve_svc`; ``parallel`` to TRON.  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` with ``switched`` set."""
    options = dict(
        stall=stall,
        max_iter=max_iter,
        dual_epochs=dual_epochs,
        parallel=parallel,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        verbose=dual_options.get("verbose", False),
        primal_data=primal_data,
    )
    yy = np.asarray(y, dtype=np.float64)
    CC = np.asarray(C, dtype=np.float64)

    def dual(**kw):
        return dual_cd.solve_svc(ld, y, C, squared=True, tol=tol, **{**dual_options, **kw})

    return _dual_then_primal(dual, ld, y, C, "squared_hinge", 0.0, tol, 0.1, lambda r: recover_dual(yy, CC, r), options)


def l2_svr(
    ld,
    y,
    C,
    epsilon,
    *,
    tol=0.1,
    max_iter=1000,
    dual_epochs=DUAL_EPOCHS,
    parallel=True,
    callback=None,
    callback_info=None,
    time_limit=None,
    primal_data=None,
    stall=True,
    **dual_options,
):
    """Squared epsilon-insensitive regression: dual CD, then TRON if the dual used up ``dual_epochs`` or stalled
    before (``stall``, as :func:`l2_svc`'s)."""
    options = dict(
        stall=stall,
        max_iter=max_iter,
        dual_epochs=dual_epochs,
        parallel=parallel,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        verbose=dual_options.get("verbose", False),
        primal_data=primal_data,
    )
    CC = np.asarray(C, dtype=np.float64)

    def dual(**kw):
        if "alpha0" in kw:  # (the resumed epochs' start: solve_svr calls its dual variables beta)
            kw["beta0"] = kw.pop("alpha0")
        return dual_cd.solve_svr(ld, y, C, epsilon, squared=True, tol=tol, **{**dual_options, **kw})

    def beta(r):
        return recover_dual(np.asarray(y, dtype=np.float64), CC, r, float(epsilon))

    return _dual_then_primal(dual, ld, y, C, "squared_epsilon_insensitive", epsilon, tol, 0.001, beta, options)
