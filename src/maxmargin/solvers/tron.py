r"""Primal truncated Newton methods for squared-loss linear SVMs (LIBLINEAR's solvers 2 and 11).

Objectives (per-sample :math:`C_i`, bias feature included in :math:`w` as in LIBLINEAR):

* squared hinge: :math:`f(w) = \tfrac12 w\cdot w + \sum_i C_i \max(0, 1 - y_i w\cdot x_i)^2`;
* squared epsilon-insensitive: :math:`f(w) = \tfrac12 w\cdot w + \sum_i C_i \max(0, |w\cdot x_i - y_i| - \epsilon)^2`.

Both are once continuously differentiable and piecewise quadratic.  With :math:`r_i` the signed residual of the
active pieces (:math:`r_i = y_i w\cdot x_i - 1` when :math:`y_i w\cdot x_i < 1`, resp.
:math:`w\cdot x_i - y_i \mp \epsilon` outside the tube) the gradient and the generalised Hessian are

.. math:: \nabla f = w + 2 \sum_{i\in I} C_i r_i s_i x_i, \qquad
          \nabla^2 f = I + 2 \sum_{i\in I} C_i x_i x_i^T,

(:math:`s_i = y_i` for classification, 1 for regression), so a Hessian-vector product is two passes over the
active rows, :math:`v + 2 X_I^T (C_I \circ X_I v)`, and the Hessian is never formed.

Two outer methods share the passes below.  By default (``method="line_search"``, LIBLINEAR 2.40 and later;
Galli and Lin 2021) each iteration solves the Newton system :math:`H s = -g` approximately by preconditioned
conjugate gradients (Nash and Sofer's rule with the tolerance :math:`\min(0.5, \|g\|_{M^{-1}}^{1/2})`, tighter
as the gradient vanishes) and backtracks from the full step until the Armijo condition holds; the trial
lengths cost O(n) each after one pass for :math:`X s`.  On data whose Hessian is far from the identity (dense
rows of many noisy features) it stops at LIBLINEAR's objective, where the trust region stopped at the same
``tol`` with a far larger one (dense 5,000 x 2,000: 25.4 against 11.6; the minimum 7.85).

On few weights (at most :data:`DIRECT_MAX_WEIGHTS`, the bias included: one-hot categorical data as a9a, small dense
sets) the line-search method may switch to *direct* steps for the rest of a fit, once an iteration's CG steps cost as
much as forming :math:`H` from the active rows (:data:`DIRECT_SWITCH`): :math:`H` is kept from iteration to
iteration by adding and removing the outer products of the rows that enter and leave the active set, each Newton
system is solved exactly (Cholesky), and the step length is the exact minimiser of the piecewise quadratic
:math:`t \mapsto f(w + t s)` (the finite Newton method of Mangasarian 2002 and Keerthi and DeCoste 2005, with the
Hessian formed as Chapelle 2007 does for few features).  Exact steps reach the stopping rule in a few iterations
where the truncated ones take many CG products near the optimum: a9a at scikit-learn's tol 1e-4, 6 iterations and
16 CG steps against 16 and 139.  Same stopping rules; other iterates than LIBLINEAR's (``solve(direct=False)``
keeps LIBLINEAR's).

Trust region (``method="trust_region"``, LIBLINEAR before 2.40; Lin and Moré 1999; Lin, Weng and Keerthi 2008):
each iteration solves
:math:`\min_s g\cdot s + \tfrac12 s^T H s` subject to :math:`\|s\|_M \le \Delta` approximately by
preconditioned conjugate gradients (Steihaug: stop at the boundary or, by Nash and Sofer's rule, when a step
improves the quadratic model by little relative to the total), accepts the step when the actual reduction
is more than :math:`\eta_0 = 10^{-4}`
times the predicted one, and resizes :math:`\Delta` by the ratio (thresholds 0.25 / 0.75, factors
0.25 / 0.5 / 4).  The preconditioner is diagonal, :math:`M = 0.99 I + 0.01\,\mathrm{diag}(H)` (Hsia, Chiang and
Lin 2018), refreshed at every accepted step; :math:`\|s\|_M^2 = s^T M s`.

The passes over the data (function value, gradient and diagonal in one pass; a Hessian-vector product in one
pass) split the rows into chunks run on Numba threads, each accumulating :math:`X^T(\cdot)` into its own
buffer; a serial copy serves fits that already run on threads (one-vs-rest).  On large CSR data the line-search
method's CG steps read a copy of the active rows, made once a Newton iteration where they hold at most half of the
values (:data:`COMPACT_SHARE`): the same sums, in order instead of with gaps.  The outer loop (trust region
and CG) is compiled too, one call for the whole fit (or per chunk of iterations when a callback or time limit
watches), so a fit of a few milliseconds pays no Python per step.  Stopping: :math:`\|\nabla f(w)\| \le`
``tol`` :math:`\cdot \|\nabla f(w_0)\|` (classification scales ``tol`` by ``max(min(#pos, #neg), 1)/n``, as
LIBLINEAR does).
"""

from __future__ import annotations

import types

import numba
import numpy as np
from numba import njit, prange, uint64

from .. import _scratch
from .._jit import parallel_and_serial
from ._linear_common import (
    _dense_row_dot,
    _prefetch,
    all_dots,
    balanced_tol,
    column_counts,
    compact_columns,
    drive,
    l2_cache_bytes,
    pass_values,
    row_values,
    sparse_dot,
    sparse_sum,
    weighted_sum,
)
from .dual_cd import LinearFit

ETA0, ETA1, ETA2 = 1e-4, 0.25, 0.75
SIGMA1, SIGMA2, SIGMA3 = 0.25, 0.5, 4.0
EPS_CG = 0.5
#: stored values per thread below which the passes run serially (a pass over less data takes well under a
#: millisecond and waking a second core costs more than it saves).  Measured (session 4, /tmp/tron_thr.py,
#: medians of 7 fits): at 200k, a9a (450k values) 0.0176 -> 0.0144 s and ijcnn1 (650k) 0.032 -> 0.020 s on a
#: quiet machine, and no slower with one busy process beside (0.0177 -> 0.0169 s, 0.0303 -> 0.0311 s); at 1M
#: both stayed serial.  Under a heavier load (4-6 on 2 cores) two threads lost: 0.063 s against 0.03 s on a9a
#: Session 26 (Intel machine, the passes on unsigned indices, so each does less work): 50k.  Whole fits, two
#: chunks against serial, quiet: text2 (352k values) 12.3 against 14.0 ms, mushrooms (128k) 1.65 against 1.97 ms;
#: with one busy process beside: 18.9 against 17.7 ms and 2.67 against 2.50 ms (``/tmp/s26/par2.py``).
#: Session 68 (the Intel KVM guest, whose second vCPU runs at times far slower than the first): 100k, so that data
#: under 200k values run serially.  Serial against two chunks, alternating in one process (``/tmp/s68/parthr.py``,
#: ``/tmp/s68/busyab.py``), ``LinearSVC(dual=False)`` at tol 0.01: mushrooms (128k) 0.84 in a normal phase, 0.38-0.52
#: in a slow one; onehot12k (192k) 0.74-0.96, at tol 1e-4 0.46; the larger sets keep two chunks (a9a, 450k: 0.62
#: two against one in the normal phase, 1.15 in the slow one; ijcnn1 0.70 / 0.90; text2 0.87 / 1.01).  Passes of
#: ~40-60 us gain little from a second thread and lose 2x where it waits for its core.
PARALLEL_STORED = 100_000
ALPHA_PCG = 0.01
#: the outer method of :func:`solve` by default: ``"line_search"`` (LIBLINEAR 2.40's Newton method with a
#: backtracking line search) or ``"trust_region"`` (LIBLINEAR's TRON before 2.40)
METHOD = "line_search"
#: the line-search method's direct steps (:func:`_newton_run`): on data of at most this many weights (the bias
#: included) the Hessian :math:`I + 2\sum_{i\in I} C_i x_i x_i^T` is formed, kept from iteration to iteration by
#: the rows that enter or leave the active set, and each Newton system solved exactly (Cholesky), with an exact line
#: search on the piecewise quadratic.  The truncated CG steps take many products near the optimum at a tight ``tol``
#: (a9a at scikit-learn's 1e-4: 16 Newton iterations, 139 CG steps), where exact steps converge in a few (5; session
#: 67, ``/tmp/s67/hybrid.py``).  0: never.
DIRECT_MAX_WEIGHTS = 256
#: ... switched to, for the rest of the fit, after an iteration whose CG steps visited at least this multiple of the
#: (value) pairs that forming the Hessian from its active rows adds up (a pair costs ~2-3 visits of a value, but the
#: exact steps save iterations)
DIRECT_SWITCH = 1.5
#: ... and only after an iteration of at least this many CG steps: where the truncated steps converge in a few
#: products an iteration (rows of few values, well conditioned: 200,000 one-hot rows of 7 values, 10 classes, 2-3
#: products an iteration), forming the Hessian costs more than the iterations it saves (1.4x the time on that set with
#: the switch at 3)
DIRECT_MIN_CG = 8
#: ... the Hessian kept by changes while their pairs since the last build stay under this multiple of the active
#: rows' pairs (each change adds rounding; a build from scratch ends it)
DIRECT_CHURN = 4.0
#: ... and at most this many steps of the exact line search (safeguarded Newton steps on the slope, which is
#: piecewise linear: a few steps; each an O(n) pass over the outputs)
EXACT_LS_STEPS = 40


#: weight vectors longer than this (2 MB) outgrow the per-core cache: where the rows are short too (at most
#: FAR_ROW_VALUES stored values a row on average), the sparse passes prefetch the weights (and accumulator entries)
#: of the row ``WEIGHTS_AHEAD`` rows on -- each is a miss of its own (hashed features).  Session 7 (1 MB, any row
#: length): hashed300k's primal fit 2.63 -> 1.62 s.  Session 66 (Intel Xeon, 2 MB L2 a core; whole fits, the two
#: rules alternating in one process, ``/tmp/s66/farfit.py``; the same iterates): 400,000 rows of 1.7 values on 150,000
#: used features (Zipf) 0.78x the time without the prefetch, 1M hashed features on rows of 81 values (hash32)
#: 0.84-0.89, rows of 112-2,990 values (wide1m, news20b, bigrams, fewwide) 0.91-1.01 -- the out-of-order core
#: overlaps the misses of a long row itself, and 1.2 MB of weights mostly stay in the cache, so the prefetch's own
#: loads were the cost; hashed300k (714,000 used features, 4 values a row) keeps it: 1.13-1.17x slower without.
FAR_WEIGHTS = 1 << 18
FAR_ROW_VALUES = 16
WEIGHTS_AHEAD = 8
#: ... and only where the columns an L2 cache holds (the weight and accumulator entries of the ``L2 / 16`` most
#: frequent columns) hold less than this share of the stored values: text's frequent words stay in the cache, and the
#: prefetch of every value's entries cost more than the misses of the rare ones.  Session 73, whole fits without / with
#: the prefetch, alternating in one process (``/tmp/s73/farab.py``): tweets5 (2**18 columns, 9.5 values a row, the
#: 65,536 most frequent columns 80% of the values) 0.75 at C = 1, 0.91 at C = 0.01; hashed300k (714,603 used
#: columns, 20%) 1.54, veryshort's rows 21%.  Decided once per fit (:func:`far_weights`) and handed to the compiled
#: functions as ``far`` in the data's group of arguments (``..., bias, unit, far``; the gradient's pass and the direct
#: steps' Hessian take it unused)
FAR_HOT_SHARE = 0.5
#: the line-search method's CG steps (:func:`_newton_run`) on CSR rows run on a copy of the active rows, one after
#: the other (:func:`_compact`, made once a Newton iteration), where these hold at most this share of the stored
#: values: a pass over the active rows in place, in order but with gaps, missed the cache and the TLB on every row.
#: Session 75, one Hessian-vector product in place / on the copy: raretext's 11% active rows 4.9-8.8 / 1.2 ns a
#: value, 23% 6.5 / 1.4, 59% 3.9 / 2.1; realsim's 19% 4.3 / 0.95.  The copy costs about one pass in place; the sums are
#: the same, so are the iterates.  The copy's arrays hold at most this share of the data's (kept blocks) ...
COMPACT_SHARE = 0.5
#: ... on CSR data of at least this many bytes (values and column numbers): smaller data stay within the cache and the
#: TLB's reach, where the copy cost more than it saved (text2, 4 MB: 1.1-1.2x the time) ...
COMPACT_MIN_BYTES = 16 << 20
#: ... and of at least this many stored values a row on average: on short rows a product's time goes to the weights
#: it gathers and scatters, not to reading the row (short_text's 8 values a row: 3.5 / 3.1 ns a value in place / on the
#: copy, and whole fits 1.1-1.26x the time with the copy)
COMPACT_MIN_ROW_VALUES = 12
#: ``kind`` for :func:`_fun` where only the products ``X v`` are wanted (the line search's ``X s``: the loss of a
#: direction, with its branch on the sign of each product, mispredicted for about half the rows, was thrown away;
#: session 66, that pass 0.7-0.8x the time on 400,000 rows of 1.7 values and on ijcnn1)
PRODUCTS_ONLY = -1


def far_weights(ld):
    """Whether the sparse passes over ``ld`` prefetch the weights of the rows ahead: :data:`FAR_WEIGHTS`,
    :data:`FAR_ROW_VALUES`, :data:`FAR_HOT_SHARE` (the columns' counts: made once per data, shared with the fold and
    :func:`~._linear_common.compact_columns`; the answer kept on the data for one-vs-rest's other problems)."""
    n = max(ld.n_samples, 1)
    if ld.dense or ld.n_weights <= FAR_WEIGHTS or ld.indices.size > FAR_ROW_VALUES * n:
        return False
    far = getattr(ld, "_far", None)
    if far is None:
        counts = column_counts(ld)
        hot = l2_cache_bytes() // 16
        far = hot < counts.shape[0] and float(
            np.partition(counts, counts.shape[0] - hot)[counts.shape[0] - hot :].sum()
        ) < FAR_HOT_SHARE * float(counts.sum())
        ld._far = far
    return far


@njit(cache=True, nogil=True, inline="always")
def _prefetch_weights(i, indices, indptr, v, a):
    """Prefetch ``v[j]`` and ``a[j]`` for the (first 16) columns ``j`` of CSR row ``i``."""
    lo = indptr[i]
    for k in range(lo, min(indptr[i + 1], lo + 16)):
        _prefetch(v, indices[k])
        _prefetch(a, indices[k])


@njit(cache=True, nogil=True, inline="always")
def _residual(o, yi, kind, eps):
    """(r, s): the active piece's residual r (0 when inactive) and sign s of the loss at output ``o``."""
    if kind == 0:
        mg = yi * o
        if mg < 1.0:
            return mg - 1.0, yi
        return 0.0, 1.0
    d = o - yi
    if d > eps:
        return d - eps, 1.0
    if d < -eps:
        return d + eps, 1.0
    return 0.0, 1.0


def _fun(w, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, o, n_chunks):
    """The loss part of f(w); stores the outputs ``o = X w`` for :func:`_grad_diag`.  With ``kind`` =
    :data:`PRODUCTS_ONLY`, only the outputs (returns 0)."""
    n = y.shape[0]
    fs = np.zeros(n_chunks)
    loss = kind != PRODUCTS_ONLY
    has_bias = bias > 0
    for t in prange(n_chunks):
        lo = t * n // n_chunks
        hi = (t + 1) * n // n_chunks
        f = 0.0
        wb = bias * w[nf] if has_bias else 0.0
        for i in range(uint64(lo), uint64(hi)):  # unsigned: no negative-index test on each load
            if far and i + WEIGHTS_AHEAD < hi:
                _prefetch_weights(i + WEIGHTS_AHEAD, indices, indptr, w, w)
            if dense:
                acc = _dense_row_dot(Xd[i], w, nf)  # vector lanes (reassociated sum)
            elif unit:
                acc = sparse_sum(indices, indptr[i], indptr[i + uint64(1)], w)
            else:
                acc = sparse_dot(data, indices, indptr[i], indptr[i + uint64(1)], w)
            acc += wb
            o[i] = acc
            if loss:
                r, _ = _residual(acc, y[i], kind, eps)
                f += C[i] * r * r
        fs[t] = f
    return fs.sum()


def _grad_diag(o, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, z, act, n_act, acc, n_chunks):
    """From the outputs ``o``: sets ``z_i`` (2 C_i on the active rows, else 0), the active rows of chunk ``t`` in
    ``act[lo_t : lo_t + n_act[t]]`` and ``acc[t]`` = :math:`X^T coef` and :math:`X^T (z x^2)` interleaved (weight
    ``j``'s at ``2j`` and ``2j + 1``; coef_i = 2 C_i r_i s_i); the caller adds the chunks, ``w`` and 1.  (Side by
    side, ``[X^T coef | X^T (z x^2)]``, every stored value wrote two cache lines a weight vector apart: on 2**20
    hashed columns, 16 MB of accumulator a chunk, the pass took 44 ms against 27-34 interleaved, session 62.  A
    prefetch of the accumulators 8 rows ahead, as the other passes prefetch the weights, made it slower: 30.5
    against 26.6 ms on two threads, 43.9 against 40.3 on one; textbig 74.8 against 71.1.)"""
    n = y.shape[0]
    has_bias = bias > 0
    m = nf + 1 if has_bias else nf  # (acc's rows are padded: ACC_PAD_DOUBLES)
    for t in prange(n_chunks):
        a = acc[t]
        a[: 2 * m] = 0.0
        lo = t * n // n_chunks
        hi = (t + 1) * n // n_chunks
        cnt = 0
        cb = 0.0  # the bias feature's sums, added once after the rows
        zb = 0.0
        for i in range(uint64(lo), uint64(hi)):
            r, sgn = _residual(o[i], y[i], kind, eps)
            if r == 0.0:
                z[i] = 0.0
                continue
            act[lo + cnt] = i
            cnt += 1
            c = 2.0 * C[i] * r * sgn
            zi = 2.0 * C[i]
            z[i] = zi
            if dense:
                for j in range(nf):
                    v = Xd[i, j]
                    a[2 * j] += c * v
                    a[2 * j + 1] += zi * v * v
            elif unit:
                for k in range(uint64(indptr[i]), uint64(indptr[i + uint64(1)])):
                    j = uint64(2) * uint64(indices[k])
                    a[j] += c
                    a[j + uint64(1)] += zi
            else:
                for k in range(uint64(indptr[i]), uint64(indptr[i + uint64(1)])):
                    j = uint64(2) * uint64(indices[k])
                    v = data[k]
                    a[j] += c * v
                    a[j + uint64(1)] += zi * v * v
            cb += c
            zb += zi
        if has_bias:
            a[2 * nf] += cb * bias
            a[2 * nf + 1] += zb * bias * bias
        n_act[t] = cnt


def _hess_vec(v, Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, n_chunks):
    """acc[t, :m] = sum over chunk t's active rows (listed by :func:`_grad_diag`) of z_i x_i (x_i . v); the
    caller adds v and the chunks."""
    n = z.shape[0]
    has_bias = bias > 0
    for t in prange(n_chunks):
        a = acc[t]
        a[: v.shape[0]] = 0.0  # the products fill the first half only
        lo = t * n // n_chunks
        end = lo + n_act[t]
        vb = bias * v[nf] if has_bias else 0.0
        cb = 0.0  # the bias feature's share, added once after the rows
        for q in range(lo, end):
            i = uint64(act[q])
            if far and q + WEIGHTS_AHEAD < end:
                _prefetch_weights(act[q + WEIGHTS_AHEAD], indices, indptr, v, a)
            zi = z[i]
            if dense:
                c = zi * (_dense_row_dot(Xd[i], v, nf) + vb)
                for j in range(nf):
                    a[j] += c * Xd[i, j]
            else:
                p0 = indptr[i]
                p1 = indptr[i + uint64(1)]
                o = sparse_sum(indices, p0, p1, v) if unit else sparse_dot(data, indices, p0, p1, v)
                c = zi * (o + vb)
                if unit:
                    for k in range(uint64(p0), uint64(p1)):
                        a[uint64(indices[k])] += c
                else:
                    for k in range(uint64(p0), uint64(p1)):
                        a[uint64(indices[k])] += c * data[k]
            cb += c
        if has_bias:
            a[nf] += cb * bias


def _compact(data, indices, indptr, unit, z, act, n_act, n_chunks, cdata, cindices, cindptr, cz, counts):
    """Copy the active rows (listed by :func:`_grad_diag`, chunk by chunk) into ``cdata``/``cindices`` one after
    the other, so that the Hessian-vector products of the CG steps read them in order: chunk ``t``'s rows become rows
    ``lo_t .. lo_t + n_act[t] - 1`` of ``cindptr`` (their ``z`` in ``cz``), listed by the identity.  ``counts``:
    (n_chunks + 1) scratch.  Returns False, copying nothing, where the active rows hold more values than ``cindices``
    (see :data:`COMPACT_SHARE`); ``cdata`` is not written for 0/1 values (``unit``: never read)."""
    n = z.shape[0]
    for t in prange(n_chunks):
        lo = t * n // n_chunks
        c = 0
        for q in range(lo, lo + n_act[t]):
            i = uint64(act[q])
            c += indptr[i + uint64(1)] - indptr[i]
        counts[t + 1] = c
    counts[0] = 0
    for t in range(n_chunks):
        counts[t + 1] += counts[t]
    if counts[n_chunks] > cindices.shape[0]:
        return False
    for t in prange(n_chunks):
        lo = t * n // n_chunks
        off = counts[t]
        for q in range(lo, lo + n_act[t]):
            i = uint64(act[q])
            cindptr[q] = off
            cz[q] = z[i]
            p0 = indptr[i]
            p1 = indptr[i + uint64(1)]
            for p in range(uint64(p0), uint64(p1)):
                cindices[off] = indices[p]
                if not unit:
                    cdata[off] = data[p]
                off += 1
        cindptr[lo + n_act[t]] = off  # (= the next chunk's first, where every row of this one is active)
    return True


# The row loops are written out here rather than through the shared row helpers: measured 2-2.5x faster
# Hessian-vector products on a9a and ijcnn1.
_fun_par, _fun_ser = parallel_and_serial(_fun, nogil=True)
_grad_diag_par, _grad_diag_ser = parallel_and_serial(_grad_diag, nogil=True)
_hess_vec_par, _hess_vec_ser = parallel_and_serial(_hess_vec, nogil=True)
_compact_par, _compact_ser = parallel_and_serial(_compact, nogil=True)
#: the passes the outer-loop functions below call: each compiled family (:func:`_compiled_family`) binds its own
_FUN, _GRAD_DIAG, _HESS_VEC, _COMPACT = _fun_ser, _grad_diag_ser, _hess_vec_ser, _compact_ser


# --------------------------------------------------------------------------- the compiled outer loop
#
# The trust-region iterations and the CG steps run in one compiled call (:func:`_tron_run`, compiled once per
# family of passes by :func:`_compiled_family`: serial and parallel): on small sets (mushrooms: a fit of ~6 ms)
# the Python loop and its small-vector NumPy temporaries cost ~0.5 ms a fit.  The state between calls (chunks
# of iterations, for a callback or time limit) lives in three arrays: ``vec`` (rows W, G, M, S, R, D, HD, ZV,
# WN, MI (1/M) below, each of ``m`` weights), ``fstate`` and ``istate``.

W, G, MP, S, R, D, HD, ZV, WN, MI = range(10)
F_F, F_GNORM, F_GNORM0, F_DELTA, F_TOL, F_CHURN, F_GATE, F_SWITCH = range(8)
I_IT, I_DONE, I_HV, I_CUR, I_DIRECT, I_DSTEPS, I_PENDING = range(7)
#: ``istate[I_DIRECT]``: the direct steps (:data:`DIRECT_MAX_WEIGHTS`) not allowed (0), allowed (1), running (2);
#: ``istate[I_DSTEPS]``: how many Newton iterations took a direct step; ``istate[I_PENDING]``: 1 while f, g and M at
#: ``vec[W]`` are still to be made (:meth:`_State.start` leaves them to the first compiled call of the iterations,
#: :func:`_tron_init` there: a second call's dispatch cost ~45 us of a 2.5 ms fit with cold caches, session 70)
DIRECT_OFF, DIRECT_ALLOWED, DIRECT_ON = 0, 1, 2
#: ``istate[I_DONE]``: the gradient rule met (1); the method stuck before it (2: LIBLINEAR's "line search
#: fails"); or flat (3: LIBLINEAR's "actred too small", a decrease of at most 1e-12 of f, and the trust region's
#: step that predicts and makes no decrease).  Both ends before the gradient rule were reported as converged until
#: session 65, when random problems against scikit-learn found one 12% above the optimum: 19 rows of features ~400
#: in size, C = 10, per-row weights -- the Newton step at a point where rows sit at the hinge's kink ignores their
#: curvature (~2 C x^2 = 1e7 once active), so no step length down to 2**-20 met the Armijo rule; of 20 x 12 such
#: problems (``/tmp/s65/findstuck.py``) 5 of the first 7 seeds stuck, at relative duality gaps
#: (:func:`recovered_gap`) of 40-600.  Both ends also come at the optimum, where rounding stops the steps (ijcnn1 at
#: C = 100 and tol 1e-8: gap 9e-10; the squared epsilon-insensitive loss on the badly scaled rows: 1e-8), so
#: :func:`solve` reports ``"converged"`` where the gap of the recovered dual variables is within :data:`END_GAP`,
#: else ``"stalled"``.
DONE_TOL, DONE_STUCK, DONE_FLAT = 1, 2, 3
#: an end before the gradient rule (:data:`DONE_STUCK`, :data:`DONE_FLAT`) counts as converged at most this relative
#: duality gap (:func:`recovered_gap`)
END_GAP = 1e-6


# The sums over the m weights below keep eight partial sums (element j in sum j mod 8, the eight added pairwise,
# then the last m mod 8 elements): one running sum waits for each addition to finish, and the CG steps make five
# such sums each.  Measured (session 33, AMD EPYC Zen 5): a dot of 30,001 weights 14.9 -> 7.5 us; text2's fit
# (5 Newton steps, 16 CG steps) spent ~1 ms of 6 in them.  A fixed order: the same bits on every run.
# The eight lanes are written out in each of the five sums (here, :func:`_c_hess_vec`, :func:`_cg_step`): one
# generic sum over an inlined term with a constant ``kind`` gave the same code but compiled the TRON family in 53 s
# instead of 22 s in a fresh process (17 s before the lanes), so it was not kept.


@njit(cache=True, nogil=True, inline="always")
def _dot(a, b):
    n = a.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    j = 0
    while j + 8 <= n:
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
        s4 += a[j + 4] * b[j + 4]
        s5 += a[j + 5] * b[j + 5]
        s6 += a[j + 6] * b[j + 6]
        s7 += a[j + 7] * b[j + 7]
        j += 8
    t = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        t += a[j] * b[j]
        j += 1
    return t


@njit(cache=True, nogil=True, inline="always")
def _mdot(a, M, b):
    n = a.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    j = 0
    while j + 8 <= n:
        s0 += a[j] * M[j] * b[j]
        s1 += a[j + 1] * M[j + 1] * b[j + 1]
        s2 += a[j + 2] * M[j + 2] * b[j + 2]
        s3 += a[j + 3] * M[j + 3] * b[j + 3]
        s4 += a[j + 4] * M[j + 4] * b[j + 4]
        s5 += a[j + 5] * M[j + 5] * b[j + 5]
        s6 += a[j + 6] * M[j + 6] * b[j + 6]
        s7 += a[j + 7] * M[j + 7] * b[j + 7]
        j += 8
    t = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        t += a[j] * M[j] * b[j]
        j += 1
    return t


@njit(cache=True, nogil=True, inline="always")
def _precondition(Mi, r, zv):
    """zv = M^-1 r (``Mi``: the inverse of the diagonal M); returns z.r (eight partial sums, as :func:`_dot`)."""
    n = r.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    j = 0
    while j + 8 <= n:
        zv[j] = r[j] * Mi[j]
        zv[j + 1] = r[j + 1] * Mi[j + 1]
        zv[j + 2] = r[j + 2] * Mi[j + 2]
        zv[j + 3] = r[j + 3] * Mi[j + 3]
        zv[j + 4] = r[j + 4] * Mi[j + 4]
        zv[j + 5] = r[j + 5] * Mi[j + 5]
        zv[j + 6] = r[j + 6] * Mi[j + 6]
        zv[j + 7] = r[j + 7] * Mi[j + 7]
        s0 += zv[j] * r[j]
        s1 += zv[j + 1] * r[j + 1]
        s2 += zv[j + 2] * r[j + 2]
        s3 += zv[j + 3] * r[j + 3]
        s4 += zv[j + 4] * r[j + 4]
        s5 += zv[j + 5] * r[j + 5]
        s6 += zv[j + 6] * r[j + 6]
        s7 += zv[j + 7] * r[j + 7]
        j += 8
    t = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        zv[j] = r[j] * Mi[j]
        t += zv[j] * r[j]
        j += 1
    return t


@njit(cache=True, nogil=True)
def _all_zero(w):
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            return False
    return True


@njit(cache=True, nogil=True)
def _loss_at_zero(y, C, kind, eps, o):
    """f(0) (the loss part alone: w = 0), and the outputs ``o = X 0 = 0``."""
    f = 0.0
    for i in range(y.shape[0]):
        o[i] = 0.0
        r, _ = _residual(0.0, y[i], kind, eps)
        f += C[i] * r * r
    return f


def _c_fun(w, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, o, chunks):
    """f(w), storing X w in ``o``."""
    loss = _FUN(w, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, o, chunks)
    return 0.5 * _dot(w, w) + loss


def _c_grad(
    w, g, M, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, o, z, act, n_act, acc, chunks
):
    """g = grad f and the preconditioner M = (1 - a) + a diag(H) at the point whose outputs are ``o``;
    returns ||g||."""
    _GRAD_DIAG(o, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, z, act, n_act, acc, chunks)
    m = w.shape[0]
    _sum_chunks(acc, chunks, 2 * m)
    a0 = acc[0]
    gn = 0.0
    for j in range(m):
        gj = w[j] + a0[2 * j]
        dj = 1.0 + a0[2 * j + 1]
        g[j] = gj
        M[j] = (1.0 - ALPHA_PCG) + ALPHA_PCG * dj
        gn += gj * gj
    return np.sqrt(gn)


def _c_hess_vec(v, out, Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks):
    """out = H v; returns v . out (in eight partial sums by j mod 8, as :func:`_dot`: the caller's next sum, made
    in this pass)."""
    _HESS_VEC(v, Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks)
    n = v.shape[0]
    _sum_chunks(acc, chunks, n)
    a0 = acc[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    j = 0
    while j + 8 <= n:
        s0 += v[j] * _hv_entry(v, a0, out, j)
        s1 += v[j + 1] * _hv_entry(v, a0, out, j + 1)
        s2 += v[j + 2] * _hv_entry(v, a0, out, j + 2)
        s3 += v[j + 3] * _hv_entry(v, a0, out, j + 3)
        s4 += v[j + 4] * _hv_entry(v, a0, out, j + 4)
        s5 += v[j + 5] * _hv_entry(v, a0, out, j + 5)
        s6 += v[j + 6] * _hv_entry(v, a0, out, j + 6)
        s7 += v[j + 7] * _hv_entry(v, a0, out, j + 7)
        j += 8
    t = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        t += v[j] * _hv_entry(v, a0, out, j)
        j += 1
    return t


@njit(cache=True, nogil=True, inline="always")
def _sum_chunks(acc, chunks, n):
    """acc[0, :n] += acc[c, :n] for the other chunks (a loop over the chunks inside the loop over the weights
    kept it from vector instructions: text2's combine of two chunks took 55 of a Hessian-vector product's 209 us)."""
    a0 = acc[0]
    for c in range(1, chunks):
        ac = acc[c]
        for j in range(n):
            a0[j] += ac[j]


@njit(cache=True, nogil=True, inline="always")
def _hv_entry(v, a0, out, j):
    """out[j] = v[j] plus the (summed) chunks' products ``a0``; returns it."""
    t = v[j] + a0[j]
    out[j] = t
    return t


@njit(cache=True, nogil=True, inline="always")
def _cg_step(s, r, d, Hd, g, alpha):
    """s += alpha d, r -= alpha Hd; returns s . (r - g) at the new s and r (eight partial sums, as :func:`_dot`)."""
    n = s.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    j = 0
    while j + 8 <= n:
        s0 += _cg_entry(s, r, d, Hd, g, alpha, j)
        s1 += _cg_entry(s, r, d, Hd, g, alpha, j + 1)
        s2 += _cg_entry(s, r, d, Hd, g, alpha, j + 2)
        s3 += _cg_entry(s, r, d, Hd, g, alpha, j + 3)
        s4 += _cg_entry(s, r, d, Hd, g, alpha, j + 4)
        s5 += _cg_entry(s, r, d, Hd, g, alpha, j + 5)
        s6 += _cg_entry(s, r, d, Hd, g, alpha, j + 6)
        s7 += _cg_entry(s, r, d, Hd, g, alpha, j + 7)
        j += 8
    t = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        t += _cg_entry(s, r, d, Hd, g, alpha, j)
        j += 1
    return t


@njit(cache=True, nogil=True, inline="always")
def _cg_entry(s, r, d, Hd, g, alpha, j):
    sj = s[j] + alpha * d[j]
    rj = r[j] - alpha * Hd[j]
    s[j] = sj
    r[j] = rj
    return sj * (rj - g[j])


def _tron_init(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    unit,
    far,
    y,
    C,
    kind,
    eps,
    outs,
    z,
    act,
    n_act,
    acc,
    chunks,
    vec,
    fstate,
    istate,
):
    """f, g, M, ||g|| and the first trust-region radius at ``vec[W]``, where ``istate[I_PENDING]`` says they are
    still to be made (it is cleared; the iterations' compiled calls begin here)."""
    if not istate[I_PENDING]:
        return
    istate[I_PENDING] = 0
    cur = istate[I_CUR]
    w = vec[W]
    if _all_zero(w):  # a cold start: X w = 0 without a pass over the data (reg_dense: 1 ms of a 17 ms fit)
        fstate[F_F] = _loss_at_zero(y, C, kind, eps, outs[cur])
    else:
        fstate[F_F] = _c_fun(
            w, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, outs[cur], chunks
        )
    gn = _c_grad(
        w,
        vec[G],
        vec[MP],
        Xd,
        data,
        indices,
        indptr,
        dense,
        nf,
        bias,
        unit,
        far,
        y,
        C,
        kind,
        eps,
        outs[cur],
        z,
        act,
        n_act,
        acc,
        chunks,
    )
    fstate[F_GNORM] = gn
    if fstate[F_GNORM0] < 0.0:
        fstate[F_GNORM0] = gn
    fstate[F_DELTA] = np.sqrt(_mdot(vec[G], vec[MP], vec[G]))
    if gn <= fstate[F_TOL] * fstate[F_GNORM0] or gn == 0.0:
        istate[I_DONE] = 1


@njit(cache=True, nogil=True, inline="always")
def _pcg_start(g, M, Mi, s, r, zv, d):
    """Mi = 1 / M (the CG steps multiply by it: a division a weight cost text2's steps ~30 of ~280 us), s = 0,
    r = -g, z = M^-1 r, d = z; returns z.r."""
    zTr = 0.0
    for j in range(g.shape[0]):
        Mi[j] = 1.0 / M[j]
        s[j] = 0.0
        r[j] = -g[j]
        zv[j] = r[j] * Mi[j]
        d[j] = zv[j]
        zTr += zv[j] * r[j]
    return zTr


@njit(cache=True, nogil=True, inline="always")
def _pcg_turn(Mi, r, zv, d, zTr):
    """z = M^-1 r and the next direction d = z + (z.r / zTr) d; returns the new z.r."""
    zTr_new = _precondition(Mi, r, zv)
    beta = zTr_new / zTr
    for j in range(r.shape[0]):
        d[j] = zv[j] + beta * d[j]
    return zTr_new


def _trpcg_c(Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks, vec, delta):
    r"""Steihaug PCG for min Q(s) = g.s + 1/2 s'Hs, ||s||_M <= delta, into ``vec[S]`` with ``vec[R]`` = -g - Hs.

    Stops at the boundary, or by the truncated-Newton rule of Nash and Sofer on the model's decrease: after
    step i, when :math:`i\,(Q_i - Q_{i-1}) \ge` ``EPS_CG`` :math:`\cdot Q_i` (the last step gained little
    relative to the total), or when the preconditioned residual vanishes.  Returns the Hessian-vector products
    made.
    """
    g, M, s, r, d, Hd, zv, Mi = vec[G], vec[MP], vec[S], vec[R], vec[D], vec[HD], vec[ZV], vec[MI]
    m = g.shape[0]
    zTr = _pcg_start(g, M, Mi, s, r, zv, d)
    Q_prev = 0.0
    it = 0
    n_hv = 0
    while zTr > 1e-30:
        dHd = _c_hess_vec(d, Hd, Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks)
        n_hv += 1
        if dHd <= 0.0:
            break
        alpha = zTr / dHd
        sMs_new = 0.0
        for j in range(m):
            t = s[j] + alpha * d[j]
            sMs_new += t * M[j] * t
        if np.sqrt(sMs_new) > delta:
            sMd = _mdot(s, M, d)
            sMs = _mdot(s, M, s)
            dMd = _mdot(d, M, d)
            dsq = delta * delta
            rad = np.sqrt(max(sMd * sMd + dMd * (dsq - sMs), 0.0))
            alpha = (dsq - sMs) / (sMd + rad) if sMd >= 0.0 else (rad - sMd) / dMd
            for j in range(m):
                s[j] += alpha * d[j]
                r[j] -= alpha * Hd[j]
            break
        for j in range(m):
            s[j] += alpha * d[j]
            r[j] -= alpha * Hd[j]
        it += 1
        Q = 0.5 * (_dot(g, s) - _dot(s, r))
        if Q < 0.0 and it * (Q - Q_prev) >= EPS_CG * Q:
            break
        Q_prev = Q
        zTr = _pcg_turn(Mi, r, zv, d, zTr)
    return n_hv


def _tron_run(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    unit,
    far,
    y,
    C,
    kind,
    eps,
    outs,
    z,
    act,
    n_act,
    acc,
    chunks,
    vec,
    fstate,
    istate,
    n_iters,
):
    """Up to ``n_iters`` accepted trust-region steps from the state; returns 0 when converged (or flat:
    :data:`DONE_FLAT`), 1 otherwise.  Step acceptance and radius update as LIBLINEAR's TRON (see the module
    docstring)."""
    _tron_init(
        Xd,
        data,
        indices,
        indptr,
        dense,
        nf,
        bias,
        unit,
        far,
        y,
        C,
        kind,
        eps,
        outs,
        z,
        act,
        n_act,
        acc,
        chunks,
        vec,
        fstate,
        istate,
    )
    if istate[I_DONE]:
        return 0
    w, g, M, s, r, wn = vec[W], vec[G], vec[MP], vec[S], vec[R], vec[WN]
    m = w.shape[0]
    accepted = 0
    while accepted < n_iters:
        istate[I_HV] += _trpcg_c(
            Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks, vec, fstate[F_DELTA]
        )
        for j in range(m):
            wn[j] = w[j] + s[j]
        gs = _dot(g, s)
        prered = -0.5 * (gs - _dot(s, r))
        trial = 1 - istate[I_CUR]
        f_new = _c_fun(wn, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, kind, eps, outs[trial], chunks)
        f = fstate[F_F]
        actred = f - f_new
        snorm = np.sqrt(_mdot(s, M, s))
        delta = fstate[F_DELTA]
        if istate[I_IT] == 0:
            delta = min(delta, snorm)
        denom = f_new - f - gs
        alpha = SIGMA3 if denom <= 0.0 else max(SIGMA1, -0.5 * (gs / denom))
        if actred < ETA0 * prered:
            delta = min(max(alpha, SIGMA1) * snorm, SIGMA2 * delta)
        elif actred < ETA1 * prered:
            delta = max(SIGMA1 * delta, min(alpha * snorm, SIGMA2 * delta))
        elif actred < ETA2 * prered:
            delta = max(SIGMA1 * delta, min(alpha * snorm, SIGMA3 * delta))
        else:
            delta = max(delta, min(alpha * snorm, SIGMA3 * delta))
        fstate[F_DELTA] = delta
        if actred > ETA0 * prered:
            istate[I_IT] += 1
            accepted += 1
            for j in range(m):
                w[j] = wn[j]
            fstate[F_F] = f_new
            f = f_new
            istate[I_CUR] = trial
            gn = _c_grad(
                w,
                g,
                M,
                Xd,
                data,
                indices,
                indptr,
                dense,
                nf,
                bias,
                unit,
                far,
                y,
                C,
                kind,
                eps,
                outs[trial],
                z,
                act,
                n_act,
                acc,
                chunks,
            )
            fstate[F_GNORM] = gn
            if gn <= fstate[F_TOL] * fstate[F_GNORM0]:
                istate[I_DONE] = 1
                return 0
        if (actred <= 0.0 and prered <= 0.0) or (abs(actred) <= 1e-12 * abs(f) and abs(prered) <= 1e-12 * abs(f)):
            istate[I_DONE] = DONE_FLAT
            return 0
    return 1


def _pcg_ls(Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks, vec):
    r"""PCG for the Newton step :math:`\min_s g\cdot s + \tfrac12 s^T H s` (no trust region), into ``vec[S]``.

    Stops by Nash and Sofer's rule with the tolerance :math:`\min(\text{EPS\_CG}, \|g\|_{M^{-1}}^{1/2})`
    (LIBLINEAR 2.40's ``NEWTON::pcg``: the steps grow exact as the gradient vanishes, so the method converges
    superlinearly), at a non-decreasing model, at a direction of no curvature, or after ``max(m, 5)`` steps.
    Returns the Hessian-vector products made."""
    g, M, s, r, d, Hd, zv, Mi = vec[G], vec[MP], vec[S], vec[R], vec[D], vec[HD], vec[ZV], vec[MI]
    m = g.shape[0]
    zTr = _pcg_start(g, M, Mi, s, r, zv, d)
    cgtol = min(EPS_CG, np.sqrt(np.sqrt(zTr)))
    Q_prev = 0.0
    it = 0
    while it < max(m, 5):
        it += 1
        dHd = _c_hess_vec(d, Hd, Xd, data, indices, indptr, dense, nf, bias, unit, far, z, act, n_act, acc, chunks)
        if dHd <= 1e-16:
            break
        alpha = zTr / dHd
        Q = -0.5 * _cg_step(s, r, d, Hd, g, alpha)
        Qdiff = Q - Q_prev
        if Q > 0.0 or Qdiff > 0.0 or it * Qdiff >= cgtol * Q:
            break
        Q_prev = Q
        zTr = _pcg_turn(Mi, r, zv, d, zTr)
    return it


@njit(cache=True, nogil=True)
def _direct_gate(indptr, dense, nf, bias, n, min_cg, switch):
    """The CG steps an iteration needs before the direct steps' test (:data:`DIRECT_SWITCH`, ``switch``) can pass:
    at least ``switch (k + 1) / 4`` for rows of at least ``k`` values (the bias feature included), and ``min_cg``
    (:data:`DIRECT_MIN_CG`).  Made where an iteration first takes ``min_cg`` steps (``fstate[F_GATE]`` holds
    ``-1 - min_cg`` until then): the shortest row's pass over ``indptr``, ~55 us of a 2.5 ms fit on mushrooms when
    every fit made it (session 69)."""
    shortest = nf
    if not dense:
        shortest = indptr[1] - indptr[0] if n else 0
        for i in range(1, n):
            shortest = min(shortest, indptr[i + 1] - indptr[i])
    k = shortest + (1 if bias > 0 else 0)
    return max(min_cg, switch * (k + 1) / 4.0)


@njit(cache=True, nogil=True)
def _row_values(i, Xd, indptr, dense, nf, bias):
    """How many values row ``i`` holds (the bias feature included)."""
    k = nf if dense else indptr[i + 1] - indptr[i]
    return k + 1 if bias > 0 else k


@njit(cache=True, nogil=True)
def _active_work(act, n_act, Xd, indptr, dense, nf, bias):
    """(values, value pairs) of the active rows (listed by :func:`_grad_diag`, chunk by chunk): what a
    Hessian-vector product visits, over two, and what forming the Hessian from them adds up (a row of k values:
    k (k + 1) / 2 pairs)."""
    n = act.shape[0]
    chunks = n_act.shape[0]
    values = 0.0
    pairs = 0.0
    for t in range(chunks):
        lo = t * n // chunks
        for q in range(lo, lo + n_act[t]):
            k = float(_row_values(act[q], Xd, indptr, dense, nf, bias))
            values += k
            pairs += 0.5 * k * (k + 1.0)
    return values, pairs


@njit(cache=True, nogil=True, inline="always")
def _row_outer(H, i, c, Xd, data, indices, indptr, dense, nf, bias, unit):
    """The upper triangle of ``H`` += c x_i x_i^T (x_i with its bias feature), pair by pair of the row's values
    (~2-4 ns a pair here; the row written out densely and ``H[j, j:] += c x_ij x_i[j:]`` for each value ran at
    5-9 ns a pair, session 67)."""
    if dense:
        row = Xd[i]
        for a in range(nf):
            ca = c * row[a]
            if ca == 0.0:
                continue
            Ha = H[a]
            for b in range(a, nf):
                Ha[b] += ca * row[b]
            if bias > 0:
                Ha[nf] += ca * bias
    else:
        lo = indptr[i]
        hi = indptr[i + 1]
        ordered = True  # (column numbers increasing along the row, as canonical CSR stores them)
        for p in range(lo + 1, hi):
            if indices[p] <= indices[p - 1]:
                ordered = False
        for p in range(lo, hi):
            ja = indices[p]
            ca = c if unit else c * data[p]
            Ha = H[ja]
            if bias > 0:
                Ha[nf] += ca * bias
            if ordered:  # every pair in the upper triangle
                if unit:
                    for q in range(p, hi):
                        Ha[indices[q]] += ca
                else:
                    for q in range(p, hi):
                        Ha[indices[q]] += ca * data[q]
                continue
            for q in range(p, hi):
                jb = indices[q]
                v = ca if unit else ca * data[q]
                if jb > ja:
                    Ha[jb] += v
                elif jb < ja:
                    H[jb, ja] += v
                else:  # (the diagonal; a column stored twice in the row counts its cross term twice)
                    Ha[ja] += v if p == q else 2.0 * v
    if bias > 0:
        H[nf, nf] += c * bias * bias


@njit(cache=True, nogil=True)
def _hessian_to(H, zH, z, Xd, data, indices, indptr, dense, nf, bias, unit, far, fstate):
    r"""Bring ``H`` (upper triangle), which holds :math:`I + \sum_i zH_i x_i x_i^T`, to the weights ``z`` of the
    active rows (:math:`z_i = 2 C_i`, 0 where inactive): by the rows whose weight changed, or from scratch where
    their pairs outnumber the active rows' or the changes since the last build pile up (:data:`DIRECT_CHURN`)."""
    n = z.shape[0]
    m = H.shape[0]
    act = 0.0
    chg = 0.0
    for i in range(n):
        if z[i] != 0.0 or zH[i] != 0.0:
            k = float(_row_values(i, Xd, indptr, dense, nf, bias))
            p = 0.5 * k * (k + 1.0)
            if z[i] != 0.0:
                act += p
            if z[i] != zH[i]:
                chg += p
    if chg == 0.0:
        return
    if chg >= act or fstate[F_CHURN] + chg > DIRECT_CHURN * act:
        for a in range(m):
            Ha = H[a]
            for b in range(a, m):
                Ha[b] = 0.0
            Ha[a] = 1.0
        for i in range(n):
            if z[i] != 0.0:
                _row_outer(H, i, z[i], Xd, data, indices, indptr, dense, nf, bias, unit)
            zH[i] = z[i]
        fstate[F_CHURN] = 0.0
        return
    for i in range(n):
        if z[i] != zH[i]:
            _row_outer(H, i, z[i] - zH[i], Xd, data, indices, indptr, dense, nf, bias, unit)
            zH[i] = z[i]
    fstate[F_CHURN] += chg


@njit(cache=True, nogil=True)
def _direct_direction(H, L, g, s):
    """s = -H^{-1} g by the Cholesky factor of ``H`` (upper triangle given; ``L`` holds it whole for LAPACK, which
    took half the time of a compiled loop at 113 weights and a third at 256); False where ``H`` is not numerically
    positive definite."""
    m = g.shape[0]
    for j in range(m):
        Hj = H[j]
        for i in range(j, m):
            L[i, j] = Hj[i]
            L[j, i] = Hj[i]
    try:
        F = np.linalg.cholesky(L)
    except Exception:  # noqa: BLE001 - (numpy.linalg.LinAlgError, raised in compiled code)
        return False
    for i in range(m):  # F u = -g
        Fi = F[i]
        v = -g[i]
        for k in range(i):
            v -= Fi[k] * s[k]
        s[i] = v / Fi[i]
    for i in range(m - 1, -1, -1):  # F^T s = u
        v = s[i]
        for k in range(i + 1, m):
            v -= F[k, i] * s[k]
        s[i] = v / F[i, i]
    for i in range(m):
        if not np.isfinite(s[i]):
            return False
    return True


@njit(cache=True, nogil=True)
def _exact_length(o, xs, y, C, kind, eps, wTs, sTs):
    r"""The step length :math:`t > 0` minimising :math:`\varphi(t) = f(w + t s)` (convex, piecewise quadratic) from the
    outputs ``o = X w``, ``xs = X s`` and :math:`w\cdot s`, :math:`s\cdot s`: Newton steps on the slope
    :math:`\varphi'` (piecewise linear, increasing) from :math:`t = 1`, kept inside the bracket of the slope's signs
    seen so far (bisection where a step leaves it)."""
    n = o.shape[0]
    lo = 0.0
    hi = np.inf
    t = 1.0
    for _ in range(EXACT_LS_STEPS):
        d1 = wTs + t * sTs
        d2 = sTs
        for i in range(n):
            x = xs[i]
            if x == 0.0:
                continue
            r, sg = _residual(o[i] + t * x, y[i], kind, eps)
            if r != 0.0:
                c = 2.0 * C[i]
                d1 += c * r * sg * x
                d2 += c * x * x
        if d1 == 0.0:
            break
        if d1 > 0.0:
            hi = t
        else:
            lo = t
        tn = t - d1 / d2
        if not (lo < tn < hi):
            tn = 0.5 * (lo + hi) if hi < np.inf else 2.0 * t
        if abs(tn - t) <= 1e-12 * t:
            t = tn
            break
        t = tn
    return t


def _line_loss(o, xs, step, y, C, kind, eps):
    """The loss part of f(w + step s) from the outputs ``o = X w`` and ``xs = X s``."""
    f = 0.0
    for i in range(o.shape[0]):
        r, _ = _residual(o[i] + step * xs[i], y[i], kind, eps)
        f += C[i] * r * r
    return f


def _newton_run(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    unit,
    far,
    y,
    C,
    kind,
    eps,
    outs,
    z,
    act,
    n_act,
    acc,
    chunks,
    vec,
    fstate,
    istate,
    n_iters,
    H,
    L,
    zH,
    cdata,
    cindices,
    cindptr,
    cz,
    cact,
    counts,
):
    r"""Up to ``n_iters`` Newton steps with a backtracking line search from the state (LIBLINEAR 2.40's
    ``NEWTON``, Galli and Lin 2021); returns 0 when converged (or stuck or flat: :data:`DONE_STUCK`), 1
    otherwise.

    The direction from :func:`_pcg_ls`; the step length halves from 1 until the Armijo condition
    :math:`f(w + a s) - f(w) \le 0.01\, a\, g\cdot s` holds (at most 20 halvings).  One pass over the data gives
    :math:`X s`; each trial length then costs O(n): the outputs are :math:`X w + a X s` and
    :math:`\|w + a s\|^2 = w\cdot w + 2a\, w\cdot s + a^2 s\cdot s`.

    Direct steps (``istate[I_DIRECT]``, :data:`DIRECT_MAX_WEIGHTS`; ``H``, ``L``: m x m, ``zH``: n): once an
    iteration's CG steps cost :data:`DIRECT_SWITCH` times what forming the Hessian from its active rows costs, the
    rest of the fit solves :math:`H s = -g` exactly (:func:`_hessian_to`, :func:`_direct_direction`) and takes the
    exact minimiser along ``s`` (:func:`_exact_length`; the Armijo search above where that length does not decrease
    ``f`` in floating point).  The stopping rules are the same."""
    _tron_init(
        Xd,
        data,
        indices,
        indptr,
        dense,
        nf,
        bias,
        unit,
        far,
        y,
        C,
        kind,
        eps,
        outs,
        z,
        act,
        n_act,
        acc,
        chunks,
        vec,
        fstate,
        istate,
    )
    if istate[I_DONE]:
        return 0
    w, g, s = vec[W], vec[G], vec[S]
    m = w.shape[0]
    cur = istate[I_CUR]
    o = outs[cur]
    xs = outs[1 - cur]
    accepted = 0
    while accepted < n_iters:
        direct = istate[I_DIRECT] == DIRECT_ON
        if direct:
            _hessian_to(H, zH, z, Xd, data, indices, indptr, dense, nf, bias, unit, far, fstate)
            direct = _direct_direction(H, L, g, s)
            if direct:
                istate[I_DSTEPS] += 1
            else:  # (not positive definite in floating point: the CG steps from here on)
                istate[I_DIRECT] = DIRECT_OFF
        if not direct:
            rows = (data, indices, indptr, z, act)
            if cindices.shape[0] > 0 and _COMPACT(
                data, indices, indptr, unit, z, act, n_act, chunks, cdata, cindices, cindptr, cz, counts
            ):  # the CG steps on the active rows' copy (COMPACT_SHARE)
                rows = (cdata, cindices, cindptr, cz, cact)
            cd, ci, cp, cz_, ca = rows
            cg = _pcg_ls(Xd, cd, ci, cp, dense, nf, bias, unit, far, cz_, ca, n_act, acc, chunks, vec)
            istate[I_HV] += cg
            gate = fstate[F_GATE]
            if istate[I_DIRECT] == DIRECT_ALLOWED and gate < 0.0 and cg >= -gate - 1.0:
                gate = fstate[F_GATE] = _direct_gate(indptr, dense, nf, bias, z.shape[0], -gate - 1.0, fstate[F_SWITCH])
            if istate[I_DIRECT] == DIRECT_ALLOWED and cg >= gate >= 0.0:
                values, pairs = _active_work(act, n_act, Xd, indptr, dense, nf, bias)
                if 2.0 * cg * values >= fstate[F_SWITCH] * pairs:
                    istate[I_DIRECT] = DIRECT_ON  # (from the identity: no row's outer product in H yet)
                    for a in range(m):
                        H[a, a:] = 0.0
                        H[a, a] = 1.0
                    zH[:] = 0.0
                    fstate[F_CHURN] = 0.0
        _FUN(s, Xd, data, indices, indptr, dense, nf, bias, unit, far, y, C, PRODUCTS_ONLY, eps, xs, chunks)
        sTs = _dot(s, s)
        wTs = _dot(w, s)
        gTs = _dot(g, s)
        wTw = _dot(w, w)
        f_old = fstate[F_F]
        step = 1.0
        f_new = f_old
        found = False
        if direct:
            step = _exact_length(o, xs, y, C, kind, eps, wTs, sTs)
            f_new = _line_loss(o, xs, step, y, C, kind, eps) + 0.5 * (wTw + step * step * sTs) + step * wTs
            found = f_new <= f_old
            if not found:
                step = 1.0
        for _ in range(0 if found else 20):
            f_new = _line_loss(o, xs, step, y, C, kind, eps) + 0.5 * (wTw + step * step * sTs) + step * wTs
            if f_new - f_old <= 0.01 * step * gTs:
                found = True
                break
            step *= 0.5
        if not found:
            istate[I_DONE] = DONE_STUCK
            return 0
        for i in range(o.shape[0]):
            o[i] += step * xs[i]
        for j in range(m):
            w[j] += step * s[j]
        fstate[F_F] = f_new
        istate[I_IT] += 1
        accepted += 1
        gn = _c_grad(
            w,
            g,
            vec[MP],
            Xd,
            data,
            indices,
            indptr,
            dense,
            nf,
            bias,
            unit,
            far,
            y,
            C,
            kind,
            eps,
            o,
            z,
            act,
            n_act,
            acc,
            chunks,
        )
        fstate[F_GNORM] = gn
        if gn <= fstate[F_TOL] * fstate[F_GNORM0]:
            istate[I_DONE] = 1
            return 0
        if abs(f_old - f_new) <= 1e-12 * abs(f_new):
            istate[I_DONE] = DONE_FLAT
            return 0
    return 1


_FAMILY = (
    "_c_fun",
    "_c_grad",
    "_c_hess_vec",
    "_tron_init",
    "_trpcg_c",
    "_tron_run",
    "_pcg_ls",
    "_line_loss",
    "_newton_run",
)


def _compiled_family(suffix, fun, grad_diag, hess_vec, compact):
    """The outer-loop functions above compiled against one set of passes (``_FUN``, ``_GRAD_DIAG``,
    ``_HESS_VEC``), under names ending in ``suffix`` (own cache entries, as :mod:`maxmargin._jit`): the serial
    family never compiles the parallel passes (compiling them took ~15 s of a first fit)."""
    scope = dict(globals())
    scope.update(_FUN=fun, _GRAD_DIAG=grad_diag, _HESS_VEC=hess_vec, _COMPACT=compact)
    out = {}
    for name in _FAMILY:
        py = globals()[name]
        f = types.FunctionType(py.__code__, scope, name + suffix, py.__defaults__, py.__closure__)
        f.__qualname__ = py.__qualname__ + suffix
        f.__doc__ = py.__doc__
        f.__module__ = py.__module__
        out[name] = scope[name] = njit(cache=True, nogil=True, error_model="numpy")(f)
    return out


_SERIAL = _compiled_family("_ser", _fun_ser, _grad_diag_ser, _hess_vec_ser, _compact_ser)
_PARALLEL = _compiled_family("_par", _fun_par, _grad_diag_par, _hess_vec_par, _compact_par)


#: each chunk's accumulator row (:func:`_grad_diag`, :func:`_hess_vec`) starts on a 128-byte boundary and ends at
#: least this many doubles before the next (a pair of cache lines, as Intel's spatial prefetcher fetches them):
#: unpadded, chunk 0's last weights and chunk 1's first shared a line that both threads wrote for every row.
#: Session 62 (Intel Xeon, 2 cores; ijcnn1's 23 weights, rows 46 doubles apart), the gradient's pass on two
#: threads 1.37 ms against 1.22 ms on one
ACC_PAD_DOUBLES = 16


def _accumulators(chunks, width):
    """(chunks, width) accumulators, each row 128-byte aligned and :data:`ACC_PAD_DOUBLES` clear of the next (a
    view of a padded block; C-ordered rows of ``stride`` doubles: callers index ``acc[t, :width]``)."""
    if chunks == 1:
        return _scratch.empty(width, np.float64).reshape(1, width)
    stride = -(-(width + ACC_PAD_DOUBLES) // 16) * 16
    raw = _scratch.empty(chunks * stride + 16, np.float64)
    skip = (-raw.ctypes.data % 128) // 8
    return raw[skip : skip + chunks * stride].reshape(chunks, stride)


def _no_copy(data_dtype, index_dtype):
    """The arrays :func:`_newton_run` takes for the active rows' copy where there is none (``cindices`` empty)."""
    one = np.zeros(1, dtype=np.int64)
    return (np.empty(0, data_dtype), np.empty(0, index_dtype), one, np.zeros(1), one, one)


_NO_COPY = {}


class _State:
    """The compiled solver's arrays and how to call it (serial, or the passes on Numba threads)."""

    def __init__(self, ld, y, C, kind, eps, parallel, tol, method="line_search", direct=True):
        self.runner = "_newton_run" if method == "line_search" else "_tron_run"
        self.args = ld.args() + (bool(ld.unit), far_weights(ld))
        n = y.shape[0]
        self.m = ld.n_weights
        stored = ld.Xd.size if ld.dense else ld.data.size
        # (Numba's thread count asked only where the data could use two chunks: ~10-30 us a call with cold caches)
        by_size = stored // PARALLEL_STORED if parallel else 1
        self.chunks = max(1, min(numba.get_num_threads(), by_size)) if by_size > 1 else 1
        self.par = bool(parallel and self.chunks > 1)
        self.data = (y, C, int(kind), float(eps))
        # the working arrays end with the fit: kept blocks (maxmargin._scratch), uninitialised -- every pass writes
        # its array before reading it.  Session 61: 400 x 500,000 rows (datasets.fewwide), 56 MB of fresh zeros a
        # fit, their page faults ~5 of a 31 ms fit.
        self.outs = _scratch.empty(2 * n, np.float64).reshape(2, n)
        self.work = (
            self.outs,
            _scratch.empty(n, np.float64),
            _scratch.empty(n, np.int64),
            np.zeros(self.chunks, dtype=np.int64),
            _accumulators(self.chunks, 2 * self.m),
            self.chunks,
        )
        self.family = _PARALLEL if self.par else _SERIAL
        self.vec = _scratch.empty(10 * self.m, np.float64).reshape(10, self.m)
        self.fstate = np.array([0.0, 0.0, -1.0, 0.0, float(tol), 0.0, 0.0, DIRECT_SWITCH])
        self.istate = np.zeros(7, dtype=np.int64)
        # the direct steps' Hessian, its factor's workspace and the rows' weights in it (kept blocks, uninitialised:
        # _newton_run sets H and zH where it switches to the direct steps)
        m = self.m if self.runner == "_newton_run" and direct and self.m <= DIRECT_MAX_WEIGHTS else 1
        self.istate[I_DIRECT] = DIRECT_ALLOWED if m > 1 else DIRECT_OFF
        self.fstate[F_GATE] = -1.0 - DIRECT_MIN_CG  # (the switch's gate: made when first needed, _direct_gate)
        self.direct = (
            _scratch.empty(m * m, np.float64).reshape(m, m),
            _scratch.empty(m * m, np.float64).reshape(m, m),
            _scratch.empty(n if m > 1 else 1, np.float64),
        )
        # the active rows' copy for the CG steps (COMPACT_SHARE; uninitialised kept blocks, written before read)
        cap = 0
        if self.runner == "_newton_run" and not ld.dense:
            per_value = ld.indices.itemsize + (0 if ld.unit else ld.data.itemsize)
            big = ld.data.size * per_value >= COMPACT_MIN_BYTES
            if big and ld.data.size >= COMPACT_MIN_ROW_VALUES * max(n, 1):
                cap = int(COMPACT_SHARE * ld.data.size)
        if cap:
            self.compact = (
                _scratch.empty(0 if ld.unit else cap, ld.data.dtype),
                _scratch.empty(cap, ld.indices.dtype),
                _scratch.empty(n + 1, np.int64),
                _scratch.empty(n, np.float64),
                np.arange(n, dtype=np.int64),
                np.empty(self.chunks + 1, dtype=np.int64),
            )
        else:  # (empty arrays of the data's types, made once: no allocations in a small fit)
            key = (ld.data.dtype, ld.indices.dtype)
            self.compact = _NO_COPY.get(key) or _NO_COPY.setdefault(key, _no_copy(*key))

    def start(self, w, gnorm0=None):
        """Start from ``w`` (a vector, or 0.0 for zeros): f, g and M there are made by the first :meth:`run` (or
        :meth:`made`)."""
        self.vec[W] = w
        if gnorm0 is not None:
            self.fstate[F_GNORM0] = gnorm0
        self.istate[I_PENDING] = 1

    def made(self):
        """f, g and M at the start made, where no :meth:`run` made them yet."""
        if self.istate[I_PENDING]:
            self.family["_tron_init"](*self.args, *self.data, *self.work, self.vec, self.fstate, self.istate)

    def gnorm_at_zero(self):
        """||grad f(0)|| (leaves the state to be restarted by :meth:`start`)."""
        self.vec[W] = 0.0
        self.fstate[F_GNORM0] = -1.0
        self.istate[I_PENDING] = 1
        self.family["_tron_init"](*self.args, *self.data, *self.work, self.vec, self.fstate, self.istate)
        self.istate[I_DONE] = 0
        return float(self.fstate[F_GNORM])

    def run(self, n_iters):
        extra = self.direct + self.compact if self.runner == "_newton_run" else ()
        return int(
            self.family[self.runner](
                *self.args, *self.data, *self.work, self.vec, self.fstate, self.istate, int(n_iters), *extra
            )
        )


def solve(
    ld,
    y,
    C,
    *,
    kind="squared_hinge",
    epsilon=0.0,
    tol=1e-4,
    max_iter=1000,
    w0=None,
    parallel=True,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
    compact=True,
    method=None,
    work_budget=None,
    direct=True,
):
    """Minimise the squared-hinge (``kind='squared_hinge'``, ``y`` in {-1, +1}) or squared epsilon-insensitive
    (``kind='squared_epsilon_insensitive'``) primal by TRON; see the module docstring.  ``w0``: a warm start;
    ``parallel``: the passes over the data on Numba threads.  Returns a
    :class:`~maxmargin.solvers.dual_cd.LinearFit` (no dual variables).  ``compact``: run on the used features
    only (:func:`~maxmargin.solvers._linear_common.compact_columns`) where few are.  ``work_budget``: give up
    (status ``"stalled"``) once the iterations have visited more stored values than this (:func:`iteration_work`;
    the squared hinge's early switch, :mod:`~maxmargin.solvers.dual_primal`); the result's ``work`` says how many
    they visited.  ``direct``: allow the line-search method's direct steps on few weights (:data:`DIRECT_MAX_WEIGHTS`;
    False: LIBLINEAR's iterates throughout)."""
    small = compact_columns(ld) if compact else None
    if small is not None:
        small, kept = small
        nf = ld.n_features
        if w0 is not None:
            w0 = np.asarray(w0, dtype=np.float64)
            w0 = np.concatenate([w0[kept], w0[nf:]])  # unused features start (and end) at 0
        fit = solve(
            small,
            y,
            C,
            kind=kind,
            epsilon=epsilon,
            tol=tol,
            max_iter=max_iter,
            w0=w0,
            parallel=parallel,
            callback=callback,
            callback_info=callback_info,
            time_limit=time_limit,
            verbose=verbose,
            compact=False,
            method=method,
            work_budget=work_budget,
            direct=direct,
        )
        w = np.zeros(ld.n_weights)
        w[kept] = fit.w[: kept.shape[0]]
        w[nf:] = fit.w[kept.shape[0] :]
        fit.w = w
        return fit
    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    code = 0 if kind == "squared_hinge" else 1
    eff_tol = float(balanced_tol(y, float(tol))) if code == 0 else float(tol)
    method = METHOD if method is None else method
    if method not in ("line_search", "trust_region"):
        raise ValueError(f"method must be 'line_search' or 'trust_region', got {method!r}")
    state = _State(ld, y, C, code, epsilon, parallel, eff_tol, method, direct)
    gnorm0 = None
    if w0 is not None and np.any(w0):
        # the stopping rule is relative to the first gradient: a warm start measures it at w = 0, as a cold
        # start would, so that a good start does not make the rule stricter
        gnorm0 = state.gnorm_at_zero()
    state.start(0.0 if w0 is None else np.asarray(w0, dtype=np.float64), gnorm0)

    work = [0.0]

    def step(k):
        if work_budget is None:
            return state.run(k), int(state.istate[I_IT])
        # one iteration at a time, each priced by iteration_work (a Python look of ~0.1 ms an iteration)
        lens = row_values(ld)
        state.made()
        active = float(np.dot(lens, state.work[1] > 0.0))  # the rows the first iteration's products visit
        for _ in range(int(k)):
            hv = int(state.istate[I_HV])
            code = state.run(1)
            work[0] += iteration_work(ld, active, int(state.istate[I_HV]) - hv)
            active = float(np.dot(lens, state.work[1] > 0.0))
            if code == 0:
                return 0, int(state.istate[I_IT])
            if work[0] > work_budget:
                return 2, int(state.istate[I_IT])
        return 1, int(state.istate[I_IT])

    def report():
        return float(state.fstate[F_F]), float(state.fstate[F_GNORM])

    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="tron",
    )
    state.made()  # (drive made no step where max_iter is 0)
    if status == "converged" and int(state.istate[I_DONE]) in (DONE_STUCK, DONE_FLAT):
        # (an end before the gradient rule: converged only at the optimum, by the recovered gap; see DONE_STUCK)
        if recovered_gap(ld, y, C, code, epsilon, state.vec[W], state.fstate[F_F]) > END_GAP:
            status = "stalled"
    fit = LinearFit(state.vec[W].copy(), None, state.fstate[F_F], None, it, state.fstate[F_GNORM], status)
    fit.cg_iter = int(state.istate[I_HV])
    fit.direct_steps = int(state.istate[I_DSTEPS])
    fit.work = work[0]
    return fit


def recover_dual(y, C, r, epsilon=None):
    r"""The dual variables of a primal point from its residuals :math:`r_i = y_i - w\cdot x_i` (the primal
    optimality conditions): :math:`\alpha_i = 2 C_i \max(0, y_i r_i)` for the squared hinge (``epsilon`` None;
    :math:`y_i r_i = 1 - y_i w\cdot x_i` for :math:`y_i = \pm 1`), :math:`\beta_i = 2 C_i\,\mathrm{sign}(r_i)
    \max(0, |r_i| - \epsilon)` for the squared epsilon-insensitive loss."""
    if epsilon is None:
        return 2.0 * C * np.maximum(0.0, y * r)
    return 2.0 * C * np.sign(r) * np.maximum(0.0, np.abs(r) - epsilon)


def squared_dual(ld, y, C, dual, epsilon=None):
    r"""The dual objective of the squared losses at ``dual`` (one pass over ``ld`` for :math:`w`):
    :math:`\sum_i \alpha_i - \tfrac12\|\sum_i y_i\alpha_i x_i\|^2 - \sum_i \alpha_i^2/(4C_i)` for the squared
    hinge (``epsilon`` None), :math:`\sum_i y_i\beta_i - \epsilon\sum_i|\beta_i| - \tfrac12\|\sum_i \beta_i
    x_i\|^2 - \sum_i \beta_i^2/(4C_i)` for the squared epsilon-insensitive loss; as
    :func:`~maxmargin.solvers.dual_cd.solve_svc` and ``solve_svr`` report it."""
    y = np.asarray(y, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    coef = dual * y if epsilon is None else dual
    w = np.zeros(ld.n_weights)
    weighted_sum(np.ascontiguousarray(coef, dtype=np.float64), w, *ld.args())
    rest = float(np.sum(dual * dual / (4.0 * C))) + 0.5 * float(w @ w)
    if epsilon is None:
        return float(np.sum(dual)) - rest
    return float(y @ dual) - float(epsilon) * float(np.sum(np.abs(dual))) - rest


def recovered_gap(ld, y, C, kind, epsilon, w, f):
    """``(f - D) / max(|f|, tiny)``: the relative duality gap of the primal objective ``f`` at ``w`` against the
    dual objective (:func:`squared_dual`) of the dual variables recovered from ``w`` (:func:`recover_dual`).  Any
    such point is dual feasible, so the gap bounds ``f``'s distance from the optimum; it is 0 at the optimum.  Two
    passes over the data.  ``kind``: 0 (squared hinge) or 1 (squared epsilon-insensitive, ``epsilon``), as the
    compiled passes take it."""
    y = np.asarray(y, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    r = y - all_dots(np.ascontiguousarray(w, dtype=np.float64), *ld.args())
    eps = None if kind == 0 else float(epsilon)
    dual = squared_dual(ld, y, C, recover_dual(y, C, r, eps), eps)
    return (float(f) - dual) / max(abs(float(f)), 1e-300)


def iteration_work(ld, active_values, products):
    """What one Newton iteration visits, in stored values: a pass over every row for the outputs :math:`X s`
    (:func:`~maxmargin.solvers._linear_common.pass_values`, as an epoch of the dual is priced), and the gradient
    pass plus ``products`` Hessian-vector products over the active rows' ``active_values``."""
    return float(pass_values(ld)) + (1.0 + products) * float(active_values)
