r"""Dual coordinate descent for L2-regularised linear SVMs (LIBLINEAR's solvers 1, 3, 12 and 13).

Classification (Hsieh, Chang, Lin, Keerthi and Sundararajan, ICML 2008)
-----------------------------------------------------------------------
Primal, with labels :math:`y_i \in \{-1, +1\}`, per-sample :math:`C_i` and :math:`\xi_i = \max(0, 1 - y_i w\cdot x_i)`:

.. math:: \min_w\ \tfrac12 w\cdot w + \sum_i C_i \xi_i \quad\text{(hinge)}
          \qquad\text{or}\qquad \min_w\ \tfrac12 w\cdot w + \sum_i C_i \xi_i^2 \quad\text{(squared hinge)}.

Dual: :math:`\min_\alpha \tfrac12 \alpha^T \bar Q \alpha - e^T\alpha` subject to :math:`0 \le \alpha_i \le U_i`, where
:math:`\bar Q = Q + D`, :math:`Q_{ij} = y_i y_j x_i\cdot x_j`, and :math:`D_{ii} = 0, U_i = C_i` (hinge) or
:math:`D_{ii} = 1/(2C_i), U_i = \infty` (squared hinge).  The solver keeps :math:`w = \sum_i y_i\alpha_i x_i`, so
one coordinate costs two sparse row operations.  For coordinate :math:`i` the gradient is
:math:`G = y_i w\cdot x_i - 1 + D_{ii}\alpha_i`, and the exact one-variable minimiser is

.. math:: \alpha_i \leftarrow \min\big(\max(\alpha_i - G/\bar Q_{ii},\ 0),\ U_i\big),
          \qquad w \leftarrow w + (\alpha_i^{new} - \alpha_i^{old})\, y_i x_i.

Each outer iteration (epoch) visits the active coordinates in a random order.  The projected gradient
:math:`PG` (:math:`\min(G,0)` at :math:`\alpha_i = 0`, :math:`\max(G,0)` at :math:`U_i`, :math:`G` inside) gives
the stopping rule :math:`\max PG - \min PG \le` ``tol``; *shrinking* drops a variable at a bound whose gradient
points out of the box by more than the previous epoch's extreme :math:`PG` and checks the full set again
before stopping.

Regression (Ho and Lin, JMLR 2012)
----------------------------------
Primal: :math:`\min_w \tfrac12 w\cdot w + \sum_i C_i \max(0, |w\cdot x_i - y_i| - \epsilon)` (or its square).
Dual: :math:`\min_\beta \tfrac12 \beta^T (Q + D)\beta - y^T\beta + \epsilon\|\beta\|_1`, :math:`-U_i \le \beta_i \le
U_i`, with :math:`Q_{ij} = x_i\cdot x_j`, :math:`D_{ii} = 0, U_i = C_i` (absolute) or :math:`D_{ii} = 1/(2C_i),
U_i = \infty` (squared), and :math:`w = \sum_i \beta_i x_i`.  With :math:`G = w\cdot x_i - y_i + D_{ii}\beta_i`,
:math:`H = \|x_i\|^2 + D_{ii}` and :math:`G^\pm = G \pm \epsilon`, the one-variable minimiser of the piecewise
quadratic is :math:`\beta_i - G^+/H` if :math:`G^+ < H\beta_i`, :math:`\beta_i - G^-/H` if :math:`G^- > H\beta_i`,
else 0, clipped to :math:`[-U_i, U_i]`.  Stopping: the sum of the violations of an epoch at most ``tol`` times
that of the first epoch (LIBLINEAR's rule).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange, uint64

from .. import _scratch
from .._jit import parallel, with_constants
from ._linear_common import (
    CD_CSR_MAX_FEATURES,
    KEEP_THRESHOLDS,
    PREFETCH_WHOLE_MIN_VALUES,
    LinearData,
    _dense_row_dot,
    _prefetch,
    aligned_floats,
    dense_dot,
    drive,
    epoch_end,
    epoch_stages,
    fold_singletons,
    narrow_indices,
    prefetch_entries,
    prefetch_plan,
    prefetch_row,
    prefetch_span,
    prefetch_staged,
    prefetch_weights,
    rand_below,
    rng_state,
    row_axpy,
    row_dot,
    shuffle_active,
    sparse_dot,
    sparse_sum,
    sqnorms,
    svr_step,
    weighted_sum,
)
from .dual_split import SplitEpochs, split_column, worth_splitting

INF = np.inf
#: the asynchronous epochs (:func:`solve_svc` with ``n_threads`` > 1) need large, high-dimensional, sparse data:
#: at least this many stored values (below, a parallel region per epoch costs more than a second worker saves)
ASYNC_STORED = 200_000
#: ... at least this many features, and at most this fraction of non-zeros: two workers then rarely write the
#: same weight at once.  On a9a (123 features, 11% non-zeros) the lost updates made ``w`` drift from
#: :math:`\sum_i y_i\alpha_i x_i` by more than its own size and the squared-hinge epochs stopped converging;
#: on the bag-of-words set (50,000 features, 0.09%) the drift stayed small and one or two serial epochs closed it.
ASYNC_MIN_FEATURES = 2000
ASYNC_MAX_DENSITY = 0.01
#: ... and at least this many rows a worker
ASYNC_MIN_ROWS = 2000


def async_workers(ld, n_threads):
    """How many workers the asynchronous epochs of :func:`solve_svc` use for data ``ld`` when offered
    ``n_threads``: 1 (serial) unless the data are large, high-dimensional and sparse (:data:`ASYNC_STORED`,
    :data:`ASYNC_MIN_FEATURES`, :data:`ASYNC_MAX_DENSITY`) with :data:`ASYNC_MIN_ROWS` rows a worker or more;
    then ``min(n_threads, Numba's thread count)``."""
    if n_threads is None or n_threads <= 1:
        return 1
    n = ld.n_samples
    stored = ld.Xd.size if ld.dense else ld.data.size
    if stored < ASYNC_STORED or ld.n_features < ASYNC_MIN_FEATURES:
        return 1
    if ld.dense or stored > ASYNC_MAX_DENSITY * n * ld.n_features:
        return 1
    return int(max(1, min(int(n_threads), numba.get_num_threads(), n // max(ASYNC_MIN_ROWS, 1))))


#: :func:`_svc_epochs` compiled twice: as written, and with ``LAG`` (dense rows of at most
#: :data:`LAG_MAX_FEATURES` features) -- each row's update of ``w`` waits until the next row is read.  Row ``i``'s
#: product then is :math:`x_i\cdot w + d_p\,(x_i\cdot x_p)` with ``w`` lacking the pending update
#: :math:`d_p x_p` of the row before, the same number in exact arithmetic (the iterates agree to rounding).  The
#: product no longer waits for the update before it: only the step's scalar arithmetic is a chain from row to
#: row, and the extra product :math:`x_i\cdot x_p` (both rows in cache) costs less than the wait on short rows.
#: Session 35 (Zen 4), dual CD epochs, ns a row as written / with LAG: 2,000 x 50 50 / 43, 20,000 x 50 79 / 50,
#: 80,000 x 50 117 / 96, 40,000 x 100 168 / 147; but 10,000 x 400 393 / 408 and 5,000 x 2,000 1,328 / 1,708 (the
#: extra product outweighs the wait on long rows).  LinearSVR's dense epochs with the same change ran 0.97-0.98x
#: the time on 100,000 x 50 (reg_dense): not worth a third compiled copy of :func:`_svr_epochs`.
LAG = False
LAG_MAX_FEATURES = CD_CSR_MAX_FEATURES


def _svc_epochs(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    y,
    diag,
    upper,
    QD,
    alpha,
    w,
    index,
    istate,
    fstate,
    rng,
    tol,
    n_epochs,
    shrinking,
    ahead,
    stages,
    entries,
):
    """Up to ``n_epochs`` epochs.  istate = [active_size, iteration]; fstate = [PGmax_old, PGmin_old, violation].
    Returns 0 when converged (an epoch over every row met ``tol``), 2 when the active rows met it (the caller
    checks every row, :func:`settled_rows`), 1 otherwise.  With ``LAG`` (dense rows only) see :data:`LAG`."""
    n = y.shape[0]
    active = istate[0]
    pg_max_old = fstate[0]
    pg_min_old = fstate[1]
    bias_sq = bias * bias if bias > 0 else 0.0
    for _ in range(n_epochs):
        pg_max = -INF
        pg_min = INF
        pend = 0  # with LAG: the row whose update is not in w yet, and its step (0.0: none)
        pd = 0.0
        for s in range(active):
            j = s + rand_below(rng, active - s)
            t = index[s]
            index[s] = index[j]
            index[j] = t
        whole = active == n  # every row visited: the stopping test may hold
        keep = 0
        pf = epoch_stages(stages, dense, active, Xd)
        for s in range(active):
            i = index[s]
            if pf == 1:
                if s + 2 < active:
                    prefetch_row(index[s + 2], Xd, data, indices, indptr, dense)
                    prefetch_entries(index, s, 2, active, y, alpha, diag, upper, QD)
            elif pf > 1:  # (0: data small enough to stay in the core's cache, no prefetch)
                prefetch_staged(index, s, active, ahead, stages, Xd, data, indices, indptr, dense, False, w)
                prefetch_entries(index, s, entries, active, y, alpha, diag, upper, QD)
            yi = y[i]
            a = alpha[i]
            if LAG:
                dot = _dense_row_dot(Xd[i], w, nf)
                if pd != 0.0:
                    dot += pd * (_dense_row_dot(Xd[i], Xd[pend], nf) + bias_sq)
                if bias > 0:
                    dot += bias * w[nf]
            else:
                dot = row_dot(i, w, Xd, data, indices, indptr, dense, nf, bias)
            G = yi * dot - 1.0 + diag[i] * a
            PG = 0.0
            if a == 0.0:
                if shrinking and G > pg_max_old:
                    continue
                if G < 0.0:
                    PG = G
            elif a == upper[i]:
                if shrinking and G < pg_min_old:
                    continue
                if G > 0.0:
                    PG = G
            else:
                PG = G
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = i
            keep += 1
            pg_max = max(pg_max, PG)
            pg_min = min(pg_min, PG)
            if abs(PG) > 1e-12:
                na = a - G / QD[i]
                if na < 0.0:
                    na = 0.0
                elif na > upper[i]:
                    na = upper[i]
                alpha[i] = na
                d = (na - a) * yi
                if d != 0.0:
                    if LAG:
                        if pd != 0.0:
                            row_axpy(pend, pd, w, Xd, data, indices, indptr, dense, nf, bias)
                        pend = i
                        pd = d
                    else:
                        row_axpy(i, d, w, Xd, data, indices, indptr, dense, nf, bias)
        active = keep
        if LAG and pd != 0.0:
            row_axpy(pend, pd, w, Xd, data, indices, indptr, dense, nf, bias)
        istate[1] += 1
        viol = pg_max - pg_min if active > 0 else 0.0
        fstate[2] = viol
        if viol <= tol:
            istate[0] = active
            fstate[0] = pg_max_old
            fstate[1] = pg_min_old
            # converged on every row; or on the active ones, and the caller checks the rest (:func:`settled_rows`)
            return 0 if whole else 2
        pg_max_old = pg_max if pg_max > 0.0 else INF
        pg_min_old = pg_min if pg_min < 0.0 else -INF
    istate[0] = active
    fstate[0] = pg_max_old
    fstate[1] = pg_min_old
    return 1


_svc_epochs_lag = with_constants(_svc_epochs, "_lag", {"LAG": True}, nogil=True, error_model="numpy")
_svc_epochs = with_constants(_svc_epochs, "_plain", {"LAG": False}, nogil=True, error_model="numpy")


#: the per-row record of :func:`_svc_epochs_rec`: alpha, y, Q_ii + D_ii, D_ii, U_i, first and end of the row's
#: stored values, 1 / (Q_ii + D_ii) -- 64 bytes, one cache line.  The classifier's step multiplies by the inverse
#: (a division's ~13 cycles were on the chain from one row's product to the next row's; session 45, epochs to tol
#: 0.1 from zero: a9a 0.92-0.96x the time, ijcnn1 0.97, text2 and mushrooms 0.98-1.01, the same epoch counts)
REC_ALPHA, REC_Y, REC_QD, REC_DIAG, REC_UPPER, REC_LO, REC_HI, REC_INV_QD, REC_WIDTH = 0, 1, 2, 3, 4, 5, 6, 7, 8


def row_records(y, alpha, QD, diag, upper, indptr):
    """The (n * :data:`REC_WIDTH`,) records :func:`_svc_epochs_rec` reads, 64-byte aligned."""
    R = _aligned_records(y.shape[0])
    _fill_records(R, y, alpha, QD, diag, upper, indptr)
    return R


def _aligned_records(n):
    """An uninitialised (n * :data:`REC_WIDTH`,) float64 array starting on a 64-byte boundary."""
    return aligned_floats(n * REC_WIDTH)


@njit(cache=True, nogil=True, error_model="numpy")
def _fill_records(R, y, alpha, QD, diag, upper, indptr):
    """The records of :func:`row_records`, one row at a time (seven strided NumPy writes took 0.23 ms on a9a's
    32,561 rows, ~4% of its dual fit at C = 0.01)."""
    for i in range(y.shape[0]):
        r = REC_WIDTH * i
        R[r + REC_ALPHA] = alpha[i]
        R[r + REC_Y] = y[i]
        R[r + REC_QD] = QD[i]
        R[r + REC_DIAG] = diag[i]
        R[r + REC_UPPER] = upper[i]
        R[r + REC_LO] = indptr[i]
        R[r + REC_HI] = indptr[i + 1]
        R[r + REC_INV_QD] = 1.0 / QD[i]


#: the serial CSR epochs run on a copy of the rows still active (records, values and column numbers side by side,
#: :class:`CompactRows`) once shrinking has left at most this share of the rows ...
COMPACT_SHARE = 0.25
#: ... of data whose epoch touches at least this many bytes (:func:`epoch_bytes`).  The active rows of a large set
#: lie scattered over all of its records and values: session 53 (``/tmp/s53/sub2.py``, 160,000 rows of 7 words
#: over 100,000 columns, hinge epochs without shrinking): 21 ns a row on 10,000 or 20,000 rows of their own against
#: 40 on all 160,000, and the shrunken tail of a fit to tol 1e-4 (~10,000 active rows) ran at 37-40 ns a row
COMPACT_MIN_BYTES = 8 << 20
#: ... and while the copy would take at most this many bytes (:func:`epoch_bytes`' share of the active rows): 200,000
#: rows of 60 words, 85 MB an epoch, whose copy of a quarter of the rows (21 MB) stays out of the cache too, ran
#: 1.06-1.13x the time with it made then (the copy of 3 million values, again after every unshrink)
COMPACT_MAX_BYTES = 8 << 20
#: ... looked for every this many epochs (the epochs otherwise run in one compiled call to the next check) from epoch
#: COMPACT_AFTER on: the copy pays over long runs (hundreds of epochs on the shrunken rows: 0.64-0.79 of the time
#: at tol 1e-4), and short ones paid for it (200 one-vs-rest problems of 16,000 rows, 10-29 epochs each: 1.05-1.15x
#: the time with copies from the start)
COMPACT_EVERY = 5
COMPACT_AFTER = 20


def epoch_bytes(ld):
    """What an epoch over every row of CSR data ``ld`` touches: values, column numbers, a 64-byte record a row, the
    weights."""
    n = max(ld.n_samples, 1)
    per_value = ld.indices.dtype.itemsize + (0 if ld.unit else ld.data.dtype.itemsize)
    return ld.data.size * per_value + 64 * n + 8 * ld.n_weights


@njit(cache=True, nogil=True)
def _compact_copy(R, data, indices, rows, R2, data2, indices2):
    """Records ``R2`` of the rows ``rows`` (their records in ``R``), their values and column numbers one after the
    other in ``data2`` / ``indices2``, each record's first and end positions rewritten to point there."""
    pos = 0
    for j in range(rows.shape[0]):
        r = REC_WIDTH * rows[j]
        r2 = REC_WIDTH * j
        for c in range(REC_WIDTH):
            R2[r2 + c] = R[r + c]
        lo = int(R[r + REC_LO])
        hi = int(R[r + REC_HI])
        R2[r2 + REC_LO] = pos
        for k in range(lo, hi):
            data2[pos] = data[k]
            indices2[pos] = indices[k]
            pos += 1
        R2[r2 + REC_HI] = pos


@njit(cache=True, nogil=True)
def _compact_back(R, R2, rows, index, index2, alpha):
    """After epochs on the copy: the copied rows' multipliers into ``R`` and ``alpha``, and the copy's order of
    the rows (``index2``, positions in ``rows``) as ``index``'s first ``len(rows)`` entries."""
    for j in range(rows.shape[0]):
        v = R2[REC_WIDTH * j + REC_ALPHA]
        R[REC_WIDTH * rows[j] + REC_ALPHA] = v
        alpha[rows[j]] = v
    for s in range(rows.shape[0]):
        index[s] = rows[index2[s]]


class CompactRows:
    """The active rows of the serial CSR epochs copied side by side (:data:`COMPACT_SHARE`).

    Made from ``index[:active]`` with ``index2`` = 0, 1, ..., so position ``s`` of the copy's order holds the row
    that position ``s`` of ``index`` held: the shuffles (same generator, same positions) and so the iterates are
    those of the epochs on all rows, bit for bit.  Valid while the active rows only shrink (until the check after
    they meet ``tol`` brings rows back); each run writes the multipliers and the order back.  The copy holds at most
    :data:`COMPACT_SHARE` of the rows, so its epochs meeting ``tol`` is always the active rows' case (code 2), which
    the epochs on the copy, seeing all of its rows active, report as code 0."""

    def __init__(self, ld, R, indices, index, active):
        self.rows = index[:active].copy()
        lo = R[REC_WIDTH * self.rows + REC_LO].astype(np.int64)
        hi = R[REC_WIDTH * self.rows + REC_HI].astype(np.int64)
        nnz = int(np.sum(hi - lo))
        self.R = _aligned_records(active)
        self.data = _scratch.empty(nnz, ld.data.dtype)  # (kept blocks: the copy ends with the fit)
        self.indices = _scratch.empty(nnz, indices.dtype)
        _compact_copy(R, ld.data, indices, self.rows, self.R, self.data, self.indices)
        self.index = np.arange(active, dtype=np.int64)
        indptr = np.zeros(active + 1, dtype=np.int64)
        np.cumsum(hi - lo, out=indptr[1:])
        part = LinearData(
            np.empty((0, 0), ld.data.dtype), self.data, self.indices, indptr, False, ld.n_features, ld.bias, ld.unit
        )
        self.plan = prefetch_plan(part)
        self.whole = whole_rows(part)

    def run(self, R, w, index, istate, fstate, rng, tol, k, shrinking, unit, n_features, bias, alpha):
        epochs = record_epochs(self.plan, self.whole)
        rec = (self.R, w, self.index, istate, fstate, rng, tol, k, shrinking, unit, self.plan[0], self.plan[1])
        code = epochs(self.data, self.indices, n_features, bias, *rec)
        _compact_back(R, self.R, self.rows, index, self.index, alpha)
        # the epochs took the copy for every row ("converged", 0): the met tol holds on the active rows only (2)
        return 2 if code == 0 else code


def _svc_epochs_rec(
    data, indices, nf, bias, R, w, index, istate, fstate, rng, tol, n_epochs, shrinking, unit, ahead, stages
):
    """:func:`_svc_epochs` for CSR rows, each row's scalars read from one 64-byte record of ``R``
    (:func:`row_records`) and the inner loops written out (the hot path of sparse data and of thin dense data).

    In the random visiting order every per-row array is a cache and TLB miss of its own: labels, alpha,
    diagonal, bound, ``Q_ii`` and ``indptr`` were six before the row's values; the record is one.  Measured
    in-process against those arrays (same iterates bit for bit; ``LinearSVC(dual=True)``, median of 5):
    hashed300k 0.52x the time, tall200k 0.54, ijcnn1 0.66, bow 0.76, mnist 0.88, sparse40k 0.92, text100 0.97;
    a9a 0.5-1.2 (noise).  ``alpha`` lives in the records while the epochs run.  ``unit``: every stored value is
    1 (0/1 features, as a9a and mushrooms), so the loops skip reading ``data`` (~20% faster epochs on a9a).
    The plain scheme asks for the record 4 rows ahead and for the values of the row 2 ahead (whose record is
    in cache by then); reading the record of the row 2 ahead without the earlier request made ijcnn1 1.6x
    slower."""
    n = index.shape[0]
    active = istate[0]
    pg_max_old = fstate[0]
    pg_min_old = fstate[1]
    has_bias = bias > 0
    W = REC_WIDTH
    for _ in range(n_epochs):
        pg_max = -INF
        pg_min = INF
        shuffle_active(index, active, rng)
        whole = active == n  # every row visited: the stopping test may hold
        keep = 0
        for s in range(active):
            i = index[s]
            if STAGED:
                q = s + stages * ahead
                if q < active:
                    _prefetch(R, W * index[q])
                q = s + (stages - 1) * ahead
                if q < active:
                    r = W * index[q]
                    prefetch_span(
                        data, indices, int(R[uint64(r + REC_LO)]), int(R[uint64(r + REC_HI)]), unit, WHOLE_ROWS
                    )
                if stages == 3:
                    q = s + ahead
                    if q < active:
                        r = W * index[q]
                        prefetch_weights(w, indices, int(R[uint64(r + REC_LO)]), int(R[uint64(r + REC_HI)]))
            else:  # the record 4 rows ahead, the values of the row 2 ahead (its record asked for 2 rows ago)
                if s + 4 < active:
                    _prefetch(R, W * index[s + 4])
                if s + 2 < active:
                    r = W * index[s + 2]
                    lo2 = int(R[uint64(r + REC_LO)])
                    if not unit:
                        _prefetch(data, lo2)
                    _prefetch(indices, lo2)
            r = W * i
            lo = int(R[uint64(r + REC_LO)])
            hi = int(R[uint64(r + REC_HI)])
            yi = R[uint64(r + REC_Y)]
            a = R[uint64(r + REC_ALPHA)]
            up = R[uint64(r + REC_UPPER)]
            acc = bias * w[nf] if has_bias else 0.0
            if unit:
                acc += sparse_sum(indices, lo, hi, w)
            else:
                acc += sparse_dot(data, indices, lo, hi, w)
            G = yi * acc - 1.0 + R[uint64(r + REC_DIAG)] * a
            PG = 0.0
            if a == 0.0:
                if shrinking and G > pg_max_old:
                    continue
                if G < 0.0:
                    PG = G
            elif a == up:
                if shrinking and G < pg_min_old:
                    continue
                if G > 0.0:
                    PG = G
            else:
                PG = G
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = i
            keep += 1
            pg_max = max(pg_max, PG)
            pg_min = min(pg_min, PG)
            if abs(PG) > 1e-12:
                na = min(max(a - G * R[uint64(r + REC_INV_QD)], 0.0), up)
                R[uint64(r + REC_ALPHA)] = na
                d = (na - a) * yi
                if d != 0.0:
                    if unit:
                        for k in range(uint64(lo), uint64(hi)):
                            w[uint64(indices[k])] += d
                    else:
                        for k in range(uint64(lo), uint64(hi)):
                            w[uint64(indices[k])] += d * data[k]
                    if has_bias:
                        w[nf] += d * bias
        active = keep
        istate[1] += 1
        viol = pg_max - pg_min if active > 0 else 0.0
        fstate[2] = viol
        if viol <= tol:
            istate[0] = active
            fstate[0] = pg_max_old
            fstate[1] = pg_min_old
            # converged on every row; or on the active ones, and the caller checks the rest (:func:`settled_rows`)
            return 0 if whole else 2
        pg_max_old = pg_max if pg_max > 0.0 else INF
        pg_min_old = pg_min if pg_min < 0.0 else -INF
    istate[0] = active
    fstate[0] = pg_max_old
    fstate[1] = pg_min_old
    return 1


@njit(cache=True, nogil=True)
def settled_rows(
    Xd, data, indices, indptr, dense, nf, bias, R, y, diag, upper, alpha, w, index, unit, pmax, pmin, C, squared, mass
):
    r"""The check after the active rows met ``tol`` (:func:`_svc_epochs` returned 2): every row's projected gradient
    at this ``w``, visited in storage order, the rows that shrinking would keep (those not settled at a bound by the
    thresholds ``pmax`` / ``pmin``) to the front of ``index``.  Returns (the largest minus the smallest projected
    gradient, the rows to the front, the loss :math:`\sum_i C_i \xi_i` (``squared``: :math:`\xi_i^2`) at this
    ``w``).  ``R``: the records of :func:`_svc_epochs_rec` (CSR rows; ``y``, ``diag``, ``upper``, ``alpha`` unused)
    or empty (the arrays read instead).  The loss is the primal objective's, less :math:`\tfrac12 w\cdot w`: where
    the check ends the fit, the objective needs no pass of its own (session 52: text2's 4.4 ms hinge fit spent 0.2
    ms in that pass).  ``mass``: empty, or the rows' folded one-row features (``Folded.mass``, the rows of folded
    data), which add :math:`\alpha_i m_i` to row :math:`i`'s :math:`y_i w\cdot x_i` in the loss (the diagonal
    ``diag`` holds them already for the gradient; session 63: news20b's folded fits made a pass of 3 ms for the
    objective, hashed300k's 6 ms).

    LIBLINEAR brings every row back and runs an epoch over all of them, in the random order, and stops when that
    epoch met ``tol`` -- the test is the same here (over every row, on the largest minus the smallest projected
    gradient; zero for a settled row), taken at one ``w`` instead of a ``w`` that moves as the epoch goes, and the
    pass reads the rows in the order they are stored: a product :math:`Xw` at the speed of memory, where the
    epoch's random order waits on each row.  Session 51: an 80,000 x 50 dense set of 1% positives (the hinge loss,
    ~800 epochs, its active rows met ``tol`` 5-7 times before every row did) 1.2 ms a check against 6.3 ms an
    epoch over every row."""
    records = R.shape[0] > 0
    n = index.shape[0]
    W = REC_WIDTH
    hi_pg = 0.0
    lo_pg = 0.0
    loss = 0.0
    keep = 0
    back = n
    for i in range(n):
        if records:
            r = W * i
            lo = int(R[uint64(r + REC_LO)])
            hi = int(R[uint64(r + REC_HI)])
            acc = bias * w[nf] if bias > 0 else 0.0
            if unit:
                acc += sparse_sum(indices, lo, hi, w)
            else:
                acc += sparse_dot(data, indices, lo, hi, w)
            a = R[uint64(r + REC_ALPHA)]
            yacc = R[uint64(r + REC_Y)] * acc
            G = yacc - 1.0 + R[uint64(r + REC_DIAG)] * a
            up = R[uint64(r + REC_UPPER)]
        else:
            a = alpha[i]
            yacc = y[i] * row_dot(i, w, Xd, data, indices, indptr, dense, nf, bias)
            G = yacc - 1.0 + diag[i] * a
            up = upper[i]
        if mass.shape[0] > 0:
            yacc += mass[i] * a
        xi = max(1.0 - yacc, 0.0)
        loss += C[i] * (xi * xi if squared else xi)
        settled = False
        if a == 0.0:
            PG = min(G, 0.0)
            settled = G > pmax
        elif a == up:
            PG = max(G, 0.0)
            settled = G < pmin
        else:
            PG = G
        hi_pg = max(hi_pg, PG)
        lo_pg = min(lo_pg, PG)
        if settled:
            back -= 1
            index[back] = i
        else:
            index[keep] = i
            keep += 1
    return hi_pg - lo_pg, keep, loss


#: the empty records of :func:`settled_rows` on dense rows
NO_RECORDS = np.empty(0)

#: the record epochs compiled twice: the plain prefetch scheme (data that stay in cache) and the staged one.  With
#: both in one function behind a runtime branch, a9a's epochs ran 7-18% slower although the staged branch never
#: ran; ``STAGED`` is a compile-time constant of each copy (``_jit.with_constants``)
STAGED = False
#: ... and the staged copy twice more: prefetching every line of a row (``WHOLE_ROWS``) or the first 64 entries from
#: the row's start (rows of at most :data:`~._linear_common.PREFETCH_WHOLE_MIN_VALUES` values on average; see
#: :func:`~._linear_common.prefetch_span`).  The plain copy prefetches the first line of the row 2 ahead only.
WHOLE_ROWS = True
_svc_epochs_rec_staged = with_constants(
    _svc_epochs_rec, "_staged", {"STAGED": True, "WHOLE_ROWS": True}, nogil=True, error_model="numpy"
)
_svc_epochs_rec_staged_head = with_constants(
    _svc_epochs_rec, "_staged_head", {"STAGED": True, "WHOLE_ROWS": False}, nogil=True, error_model="numpy"
)
_svc_epochs_rec = with_constants(_svc_epochs_rec, "_plain", {"STAGED": False}, nogil=True, error_model="numpy")


#: :func:`solve_svc` (``fold=True``) folds only where the rows' mean :math:`C_i\|x_i\|^2` (the bias feature
#: included) is at least this.  Below it each row's own multiplier moves its output little (the hinge's
#: :math:`\alpha_i \le C_i`; the squared hinge's diagonal :math:`1/(2C_i)` dwarfs :math:`\|x_i\|^2`) and the
#: fits are a few epochs long, too few to pay back the fold's passes (news20b's 2.9M values: 18-23 ms).  Session 63
#: (Intel host, tol 0.1, no fold / fold, one process alternating): squared hinge news20b (unit rows) C = 0.01 0.74-0.86
#: (4 epochs), C = 0.03 0.84, hashed300k (4 ones a row) C = 0.01 0.50-0.68 (3 epochs), bigrams C = 0.01 0.84-0.92;
#: hinge news20b C = 0.01 0.70, hashed300k 0.61.  At C = 0.1 (0.2-0.5 here: folded as before) news20b 0.93,
#: bigrams 1.13, hashed300k 0.73; at C = 1 news20b 0.88-1.11, at tol 1e-4 (20 epochs) news20b 1.12-1.21.  One-vs-rest
#: problems share one fold (``fold='shared'``): 200 classes on sparse200c fold 0.8-0.9 of the time at C = 0.01.
FOLD_MIN_CX = 0.1


def record_epochs(plan, whole):
    """The classifier's record epochs for prefetch ``plan`` (:func:`~._linear_common.prefetch_plan`) and whether the
    staged scheme prefetches ``whole`` rows (:func:`whole_rows`)."""
    if plan[1] > 1:
        return _svc_epochs_rec_staged if whole else _svc_epochs_rec_staged_head
    return _svc_epochs_rec


def whole_rows(ld):
    """Whether the staged CSR record loops prefetch whole rows for data ``ld`` (more than
    :data:`~._linear_common.PREFETCH_WHOLE_MIN_VALUES` stored values a row on average)."""
    return ld.indices.size > PREFETCH_WHOLE_MIN_VALUES * max(ld.n_samples, 1)


def _svc_async_epochs(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    y,
    diag,
    upper,
    QD,
    alpha,
    w,
    index,
    starts,
    active,
    pg,
    bparts,
    rngs,
    istate,
    fstate,
    tol,
    n_epochs,
    shrinking,
    ahead,
    stages,
    entries,
):
    """Up to ``n_epochs`` asynchronous epochs (see :func:`solve_svc`): worker ``t`` owns the positions
    ``starts[t] .. starts[t + 1]`` of ``index`` (its active ones first, ``active[t]`` of them), shuffles and
    updates them with its own generator ``rngs[t]``, reading and writing the shared ``w`` without locks.  The
    epoch's extreme projected gradients of each worker go to ``pg[t]``; the stopping and shrinking rule is the
    serial one on their extremes.  The bias weight, which every row touches, is not shared: worker ``t`` adds
    its changes to ``bparts[t, 0]`` (rows of 8 values: one cache line each), reads ``w[nf]`` plus every
    worker's part, and the parts are folded into ``w[nf]`` after each epoch -- so no bias update is lost.
    istate = [_, iteration]; fstate as :func:`_svc_epochs`."""
    n = y.shape[0]
    T = active.shape[0]
    pg_max_old = fstate[0]
    pg_min_old = fstate[1]
    has_bias = bias > 0
    for _ in range(n_epochs):
        for t in prange(T):
            lo = starts[t]
            act = active[t]
            rng = rngs[t : t + 1]
            for q in range(act):
                j = lo + q + rand_below(rng, act - q)
                tmp = index[lo + q]
                index[lo + q] = index[j]
                index[j] = tmp
            p_max = -INF
            p_min = INF
            q = 0
            while q < act:
                i = index[lo + q]
                if stages == 1:
                    if q + 2 < act:
                        prefetch_row(index[lo + q + 2], Xd, data, indices, indptr, dense)
                        prefetch_entries(index, lo + q, 2, lo + act, y, alpha, diag, upper, QD)
                elif stages > 1:
                    prefetch_staged(index, lo + q, lo + act, ahead, stages, Xd, data, indices, indptr, dense, False, w)
                    prefetch_entries(index, lo + q, entries, lo + act, y, alpha, diag, upper, QD)
                yi = y[i]
                a = alpha[i]
                if dense:
                    dot = dense_dot(Xd, i, nf, w)
                else:
                    dot = sparse_dot(data, indices, indptr[i], indptr[i + 1], w)
                if has_bias:
                    wb = w[nf]
                    for u in range(T):
                        wb += bparts[u, 0]
                    dot += bias * wb
                G = yi * dot - 1.0 + diag[i] * a
                PG = 0.0
                if a == 0.0:
                    if shrinking and G > pg_max_old:
                        act -= 1
                        index[lo + q] = index[lo + act]
                        index[lo + act] = i
                        continue
                    if G < 0.0:
                        PG = G
                elif a == upper[i]:
                    if shrinking and G < pg_min_old:
                        act -= 1
                        index[lo + q] = index[lo + act]
                        index[lo + act] = i
                        continue
                    if G > 0.0:
                        PG = G
                else:
                    PG = G
                p_max = max(p_max, PG)
                p_min = min(p_min, PG)
                if abs(PG) > 1e-12:
                    na = min(max(a - G / QD[i], 0.0), upper[i])
                    alpha[i] = na
                    d = (na - a) * yi
                    if d != 0.0:
                        if dense:
                            for c in range(nf):
                                w[c] += d * Xd[i, c]
                        else:
                            for k in range(uint64(indptr[i]), uint64(indptr[i + 1])):
                                w[uint64(indices[k])] += d * data[k]
                        if has_bias:
                            bparts[t, 0] += d * bias
                q += 1
            active[t] = act
            pg[t, 0] = p_max
            pg[t, 1] = p_min
        pg_max = -INF
        pg_min = INF
        n_active = 0
        for t in range(T):
            if has_bias:
                w[nf] += bparts[t, 0]
                bparts[t, 0] = 0.0
            pg_max = max(pg_max, pg[t, 0])
            pg_min = min(pg_min, pg[t, 1])
            n_active += active[t]
        istate[1] += 1
        viol = pg_max - pg_min if n_active > 0 else 0.0
        fstate[2] = viol
        if viol <= tol:
            if n_active == n:
                fstate[0] = pg_max_old
                fstate[1] = pg_min_old
                return 0
            for t in range(T):
                active[t] = starts[t + 1] - starts[t]
            pg_max_old = INF
            pg_min_old = -INF
            continue
        pg_max_old = pg_max if pg_max > 0.0 else INF
        pg_min_old = pg_min if pg_min < 0.0 else -INF
    fstate[0] = pg_max_old
    fstate[1] = pg_min_old
    return 1


#: the asynchronous epochs run their workers on Numba threads (no ``cache``-sharing with a serial copy: there is
#: none)
_svc_async_epochs = parallel(_svc_async_epochs, nogil=True, error_model="numpy")


def _svr_epochs(
    Xd,
    data,
    indices,
    indptr,
    dense,
    nf,
    bias,
    y,
    lam,
    upper,
    QD,
    beta,
    w,
    index,
    istate,
    fstate,
    rng,
    eps,
    tol,
    n_epochs,
    shrinking,
    ahead,
    stages,
    entries,
):
    """Up to ``n_epochs`` epochs of the regression dual.  istate = [active_size, iteration];
    fstate = [Gmax_old, Gnorm1_init, violation (sum of the last epoch's)].  Returns 0 when converged.
    Compiled twice (``_jit.with_constants``): for any rows, and for CSR rows only (``CSR_ONLY``: the dense
    branches compiled away).  Of the prefetch plan only ``stages`` counts (0: none; else the row two ahead):
    ``ahead`` and ``entries`` are not read."""
    if CSR_ONLY:
        dense = False
    n = y.shape[0]
    active = istate[0]
    g_max_old = fstate[0]
    g_norm1_init = fstate[1]
    for _ in range(n_epochs):
        g_max = 0.0
        g_norm1 = 0.0
        for s in range(active):
            j = s + rand_below(rng, active - s)
            t = index[s]
            index[s] = index[j]
            index[j] = t
        keep = 0
        pf = epoch_stages(stages, dense, active, Xd)
        for s in range(active):
            i = index[s]
            # the plain scheme (the row two ahead) wherever the plan asks for any prefetch: its staged scheme (the
            # row stages and the five per-row arrays ahead) made this loop slower (session 26, 20 epochs on the
            # Intel machine: 200,000 x 20 dense 1.13 s staged against 0.65 s plain; 100,000 x 50: 0.69 against
            # 0.51 s; 300,000 x 200 at 3% non-zeros: 2.06 against 0.90 s).  (0: data small enough to stay in the
            # core's cache, no prefetch.)  The classifier's loop, one record a row, keeps the staged scheme.
            if pf >= 1 and s + 2 < active:
                prefetch_row(index[s + 2], Xd, data, indices, indptr, dense)
                prefetch_entries(index, s, 2, active, y, beta, lam, upper, QD)
            b = beta[i]
            U = upper[i]
            if dense:
                o = row_dot(i, w, Xd, data, indices, indptr, dense, nf, bias)
            else:  # four partial sums (see row_dot)
                o = sparse_dot(data, indices, indptr[i], indptr[i + 1], w) + (bias * w[nf] if bias > 0 else 0.0)
            shrink, viol, nb = svr_step(b, U, o - y[i] + lam[i] * b, QD[i] + lam[i], eps, shrinking, g_max_old)
            if shrink:
                continue
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = i
            keep += 1
            g_max = max(g_max, viol)
            g_norm1 += viol
            if nb != b:
                beta[i] = nb
                row_axpy(i, nb - b, w, Xd, data, indices, indptr, dense, nf, bias)
        whole = active == n  # every variable visited: the stopping test may hold
        active = keep
        done, active, g_max_old, g_norm1_init = epoch_end(
            istate, fstate, g_norm1, g_norm1_init, g_max, g_max_old, tol, active, n, whole, KEEP_THRESHOLDS
        )
        if done:
            return 0
    istate[0] = active
    fstate[0] = g_max_old
    fstate[1] = g_norm1_init
    return 1


def _svr_epochs_rec(
    data, indices, nf, bias, R, w, index, istate, fstate, rng, eps, tol, n_epochs, shrinking, unit, ahead, stages
):
    """:func:`_svr_epochs` for CSR rows, each row's scalars read from one 64-byte record of ``R``
    (:func:`row_records` of ``(y, beta, Q_ii, lambda_i, U_i, indptr)``: beta in the alpha field, lambda in the
    diagonal's), with the classifier's prefetch schemes (:func:`_svc_epochs_rec`), written out here as there:
    the same block as an inlined helper (the compile-time ``STAGED`` passed in) made both loops 1.4-2.3x slower
    (session 28: a9a 2.28x, hashed300k 2.07x, reg_hashed300k 1.82x).  The same iterates as
    :func:`_svr_epochs`' CSR loop, bit for bit; ``beta`` lives in the records while the epochs run.  (Session 28:
    240,000 rows of 4 values among 1,000,000 features took ~15 ns a stored value through the five per-row arrays,
    each a cache miss of its own in the random visiting order.)"""
    n = index.shape[0]
    active = istate[0]
    g_max_old = fstate[0]
    g_norm1_init = fstate[1]
    has_bias = bias > 0
    W = REC_WIDTH
    for _ in range(n_epochs):
        g_max = 0.0
        g_norm1 = 0.0
        shuffle_active(index, active, rng)
        keep = 0
        for s in range(active):
            i = index[s]
            if STAGED:
                q = s + stages * ahead
                if q < active:
                    _prefetch(R, W * index[q])
                q = s + (stages - 1) * ahead
                if q < active:
                    r = W * index[q]
                    prefetch_span(
                        data, indices, int(R[uint64(r + REC_LO)]), int(R[uint64(r + REC_HI)]), unit, WHOLE_ROWS
                    )
                if stages == 3:
                    q = s + ahead
                    if q < active:
                        r = W * index[q]
                        prefetch_weights(w, indices, int(R[uint64(r + REC_LO)]), int(R[uint64(r + REC_HI)]))
            else:  # the record 4 rows ahead, the values of the row 2 ahead (its record asked for 2 rows ago)
                if s + 4 < active:
                    _prefetch(R, W * index[s + 4])
                if s + 2 < active:
                    r = W * index[s + 2]
                    lo2 = int(R[uint64(r + REC_LO)])
                    if not unit:
                        _prefetch(data, lo2)
                    _prefetch(indices, lo2)
            r = W * i
            lo = int(R[uint64(r + REC_LO)])
            hi = int(R[uint64(r + REC_HI)])
            b = R[uint64(r + REC_ALPHA)]
            U = R[uint64(r + REC_UPPER)]
            lam = R[uint64(r + REC_DIAG)]
            if unit:
                o = sparse_sum(indices, lo, hi, w)
            else:
                o = sparse_dot(data, indices, lo, hi, w)
            o = o + (bias * w[nf] if has_bias else 0.0)
            G = o - R[uint64(r + REC_Y)] + lam * b
            shrink, viol, nb = svr_step(b, U, G, R[uint64(r + REC_QD)] + lam, eps, shrinking, g_max_old)
            if shrink:
                continue
            index[s] = index[keep]  # kept: to the front (see _linear_common.KEEP_THRESHOLDS)
            index[keep] = i
            keep += 1
            g_max = max(g_max, viol)
            g_norm1 += viol
            if nb != b:
                R[uint64(r + REC_ALPHA)] = nb
                c = nb - b
                if unit:
                    for k in range(uint64(lo), uint64(hi)):
                        w[uint64(indices[k])] += c
                else:
                    for k in range(uint64(lo), uint64(hi)):
                        w[uint64(indices[k])] += c * data[k]
                if has_bias:
                    w[nf] += c * bias
        whole = active == n  # every variable visited: the stopping test may hold
        active = keep
        done, active, g_max_old, g_norm1_init = epoch_end(
            istate, fstate, g_norm1, g_norm1_init, g_max, g_max_old, tol, active, n, whole, KEEP_THRESHOLDS
        )
        if done:
            return 0
    istate[0] = active
    fstate[0] = g_max_old
    fstate[1] = g_norm1_init
    return 1


#: LinearSVR's dual on CSR rows reads each row's scalars from one record (:func:`_svr_epochs_rec`); False: the five
#: per-row arrays of :func:`_svr_epochs` (the same iterates; kept for the tests that compare the two)
RECORDS = True
_svr_epochs_rec_staged = with_constants(
    _svr_epochs_rec, "_staged", {"STAGED": True, "WHOLE_ROWS": True}, nogil=True, error_model="numpy"
)
_svr_epochs_rec_staged_head = with_constants(
    _svr_epochs_rec, "_staged_head", {"STAGED": True, "WHOLE_ROWS": False}, nogil=True, error_model="numpy"
)
_svr_epochs_rec = with_constants(_svr_epochs_rec, "_plain", {"STAGED": False}, nogil=True, error_model="numpy")


CSR_ONLY = False
_svr_epochs_csr = with_constants(_svr_epochs, "_csr", {"CSR_ONLY": True}, nogil=True, error_model="numpy")
_svr_epochs = with_constants(_svr_epochs, "_any", {"CSR_ONLY": False}, nogil=True, error_model="numpy")


# --------------------------------------------------------------------------- objectives


def svc_primal(w, ld, y, C, squared, parallel=False):
    """:math:`\\tfrac12 w\\cdot w + \\sum_i C_i \\xi_i` (or :math:`\\xi_i^2`)."""
    from ._linear_common import hinge_objective

    return float(hinge_objective(w, *ld.args(), y, C, bool(squared), parallel=parallel))


def folded_primal(w, folded, alpha, y, C, squared, parallel=False):
    """:func:`svc_primal` of the whole weights from the folded solver's ``w`` and ``alpha``
    (:class:`~maxmargin.solvers._linear_common.Folded`): the one-row features add :math:`y_r\\alpha_r m_r` to row
    :math:`r`'s output and :math:`\\alpha_r^2 m_r` to :math:`w\\cdot w` (:math:`m_r`: ``folded.mass``), so the pass
    runs over the folded rows and weights (news20-like: 1M weights -> 156k, a pass of 7 ms -> 3)."""
    from ._linear_common import hinge_objective

    am = alpha * folded.mass
    f = hinge_objective(w, *folded.ld.args(), y, C, bool(squared), offset=y * am, parallel=parallel)
    return float(f + 0.5 * (alpha @ am))


def svr_primal(w, ld, y, C, eps, squared, parallel=False):
    """:math:`\\tfrac12 w\\cdot w + \\sum_i C_i \\max(0, |w\\cdot x_i - y_i| - \\epsilon)` (or its square); one pass,
    on two threads where ``parallel`` and the data are large (:func:`~._linear_common.svr_objective`)."""
    from ._linear_common import svr_objective

    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    return float(svr_objective(w, *ld.args(), y, C, eps, squared, parallel=parallel))


# --------------------------------------------------------------------------- drivers


class LinearFit:
    """What a linear solver leaves: weights ``w`` (bias weight last), dual variables (or None), the primal
    ``objective``, ``dual_objective`` (or None), ``n_iter``, ``violation``, ``status`` and ``converged``."""

    def __init__(self, w, dual, objective, dual_objective, n_iter, violation, status):
        self.w = w
        self.dual = dual
        self.objective = float(objective)
        self.dual_objective = None if dual_objective is None else float(dual_objective)
        self.n_iter = int(n_iter)
        self.violation = float(violation)
        self.status = status
        self.converged = status == "converged"

    @property
    def gap(self):
        return None if self.dual_objective is None else self.objective - self.dual_objective


@njit(cache=True, nogil=True)
def _svc_box(C, norms, squared):
    r"""The classifier's dual box and diagonal from the rows' ``C`` and squared norms in one compiled pass:
    ``(diag, upper, QD, cx)`` -- :math:`D_{ii}` (``0.5 / C_i`` for the squared hinge, else 0), the upper bound
    (:math:`\infty`, else ``C_i``), :math:`Q_{ii} = \|x_i\|^2 + D_{ii}` and :math:`\sum_i C_i\|x_i\|^2`.  NumPy's
    five calls cost ~80 us right after another library's fit, where each call's code and data are cold (session 68).
    """
    n = C.shape[0]
    diag = np.empty(n)
    upper = np.empty(n)
    QD = np.empty(n)
    cx = 0.0
    for i in range(n):
        c = C[i]
        d = 0.5 / c if squared else 0.0
        diag[i] = d
        upper[i] = INF if squared else c
        QD[i] = norms[i] + d
        cx += c * norms[i]
    return diag, upper, QD, cx


@njit(cache=True, nogil=True)
def _dual_terms(alpha, diag, w):
    r""":math:`(\sum_i \alpha_i, \sum_i d_i\alpha_i^2, w\cdot w)` in one compiled call: the dual objective's parts
    at the end of :func:`solve_svc`.  NumPy's six calls (sums, products, a BLAS dot) cost ~90 us right after another
    library's fit (mushrooms, 6,093 rows: every call's code and data cold), against ~6 us warm (session 68)."""
    s = 0.0
    q = 0.0
    for i in range(alpha.shape[0]):
        a = alpha[i]
        s += a
        q += diag[i] * a * a
    ww = 0.0
    for j in range(w.shape[0]):
        ww += w[j] * w[j]
    return s, q, ww


def _warm_dual(alpha0, lower, upper, n):
    if alpha0 is None:
        return np.zeros(n)
    a = np.asarray(alpha0, dtype=np.float64).copy()
    return np.minimum(np.maximum(a, lower), upper)


def solve_svc(
    ld,
    y,
    C,
    *,
    squared=True,
    tol=0.1,
    max_iter=1000,
    shrinking=True,
    seed=0,
    alpha0=None,
    n_threads=1,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
    fold=True,
    split_threads=1,
    stall=None,
    concurrent=False,
):
    """Binary L2-regularised SVM by dual coordinate descent (see the module docstring).

    ``ld``: :class:`~maxmargin.solvers._linear_common.LinearData`; ``y`` in {-1, +1}; ``C`` per sample (> 0);
    ``alpha0``: a warm start (clipped into the new box).  Returns a :class:`LinearFit` (``dual`` = alpha).
    ``fold``: let :func:`~maxmargin.solvers._linear_common.fold_singletons` take the features stored in one
    row only out of the epochs (where they hold enough of the data; the same problem, solved with fewer weights),
    except where the fit will be short (:data:`FOLD_MIN_CX`); ``'shared'``: the fold serves several problems on
    the same data (one-vs-rest), and is made for short fits too.  ``concurrent``: other problems on the same data run
    on other threads meanwhile (one-vs-rest on threads: the prefetch plan of :func:`~._linear_common.prefetch_plan`
    without ``alone``, as for the asynchronous epochs).

    ``n_threads`` > 1 on large data (:func:`async_workers`) runs the epochs *asynchronously* first, in the
    manner of PASSCoDe-Wild (Hsieh, Yu and Dhillon, ICML 2015): the rows are split at random among the workers,
    each runs the serial epoch on its own rows (own shuffle, own shrinking) and all update one shared ``w``
    without locks, so an update can be lost and ``w`` drifts from :math:`\\sum_i y_i\\alpha_i x_i` by a little.
    When the epochs meet ``tol`` (on the workers' extreme projected gradients), ``w`` is rebuilt exactly from
    ``alpha`` and serial epochs continue until the serial stopping rule holds on that exact ``w`` -- usually one
    or two passes -- so the result meets the same ``tol`` as the serial solver, with ``w`` consistent with
    ``alpha``.  The asynchronous phase gets at most half of ``max_iter`` epochs, the serial one the rest.  The
    asynchronous phase is not reproducible run to run (thread timing decides which updates
    are lost); callers that promise reproducibility pass ``n_threads=1``.

    ``split_threads`` > 1 (and the asynchronous epochs not chosen) on CSR data of long rows
    (:func:`~maxmargin.solvers.dual_split.worth_splitting`) runs the epochs on two threads with the features split
    between them (:mod:`maxmargin.solvers.dual_split`): reproducible, the same iterates whether the threads run or
    not, but other iterates than the plain epochs' (the row sums are made in two halves).

    ``stall``: None, or ``stall(measure)`` giving a :class:`~maxmargin.solvers.dual_primal.StallWatch` that may
    stop the epochs early (status ``'stalled'``) where they will not meet ``tol`` within its budget.
    """
    n = y.shape[0]
    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    norms = sqnorms(ld)
    diag, upper, QD, cx = _svc_box(C, norms, bool(squared))
    full = ld
    # features stored in one row only become a diagonal term of that row (fold_singletons): the epochs run
    # on the other features, the same iterates in exact arithmetic; a single problem skips it where its rows'
    # mean C_i |x_i|^2 says the fit is a few epochs long (FOLD_MIN_CX)
    if fold and fold != "shared" and not hasattr(ld, "_folded"):
        fold = cx >= FOLD_MIN_CX * max(n, 1)
    folded = fold_singletons(ld) if fold else None
    diag_full = diag
    if folded is not None:
        ld = folded.ld
        diag = diag + folded.mass

    def weights(w):
        return w if folded is None else folded.weights(w, alpha * y, full.n_features)

    alpha = _warm_dual(alpha0, 0.0, upper, n)
    w = np.zeros(ld.n_weights)
    if alpha0 is not None and alpha.any():  # (a cold start's zeros: no NumPy call to find them so)
        weighted_sum(alpha * y, w, *ld.args())
    index = np.arange(n, dtype=np.int64)
    istate = np.array([n, 0], dtype=np.int64)
    fstate = np.array([INF, -INF, INF])
    rng = rng_state(seed)
    args = ld.args()
    workers = async_workers(ld, n_threads)
    # (rows streamed by two threads at once -- other problems', or the asynchronous workers' -- keep the rule of a
    # shared cache)
    plan = prefetch_plan(ld, alone=not concurrent and workers <= 1)
    asynchronous = [workers > 1]
    if workers > 1:
        index = np.random.default_rng(seed).permutation(n).astype(np.int64)
        starts = (np.arange(workers + 1, dtype=np.int64) * n) // workers
        active = np.diff(starts)
        pg = np.zeros((workers, 2))
        bparts = np.zeros((workers, 8))
        rngs = np.concatenate([rng_state(seed + 7 * (t + 1)) for t in range(workers)])

    def end_async():
        """Leave the asynchronous phase: w exactly from alpha, the serial epochs start from the full set."""
        asynchronous[0] = False
        weighted_sum(alpha * y, w, *args)
        istate[0] = n
        fstate[0] = INF
        fstate[1] = -INF

    split = None
    if workers == 1 and worth_splitting(ld, split_threads):
        m = split_column(ld)
        if m is not None:
            split = SplitEpochs(ld, y, alpha, QD, diag, upper, w, index, rng, m)
    async_limit = max(int(max_iter) // 2, 1)
    records = [None]  # the per-row records of the serial CSR epochs (made at their first call)
    checked_loss = [None]  # the loss at w when the last step ended on a check that met tol (w unchanged since)
    narrow = [None]  # their column numbers (narrow_indices)
    compact = [None]  # the active rows' copy (CompactRows), while valid
    # (the bytes of an epoch a row, where the data are large enough for the copy; else 0)
    touched = 0 if ld.dense or not shrinking else epoch_bytes(ld)
    big = [touched / n if touched >= COMPACT_MIN_BYTES else 0.0]

    def step(k):
        if asynchronous[0]:
            before = int(istate[1])
            k_async = min(int(k), async_limit - before)
            code = _svc_async_epochs(
                *args,
                y,
                diag,
                upper,
                QD,
                alpha,
                w,
                index,
                starts,
                active,
                pg,
                bparts,
                rngs,
                istate,
                fstate,
                float(tol),
                k_async,
                bool(shrinking),
                *plan,
            )
            if code != 0 and int(istate[1]) < async_limit:
                return code, istate[1]
            end_async()
            k = int(k) - (int(istate[1]) - before)
            if k <= 0:
                return 1, istate[1]
        if split is not None:
            return split.step(k, tol, shrinking, alpha, istate, fstate)
        checked_loss[0] = None
        before = int(istate[1])
        while True:
            code = serial_epochs(int(k) - (int(istate[1]) - before))
            if code != 2:
                return code, istate[1]
            # the active rows met tol: every row's test at this w, the unsettled ones active again
            if ld.dense:
                check = (*args, NO_RECORDS, y, diag, upper, alpha, w, index, False)
            else:
                check = (args[0], ld.data, narrow[0], ld.indptr, False, ld.n_features, float(ld.bias), records[0])
                check += (y, diag, upper, alpha, w, index, ld.unit)
            mass = NO_RECORDS if folded is None else folded.mass
            viol, keep, loss = settled_rows(*check, fstate[0], fstate[1], C, bool(squared), mass)
            if int(istate[1]) - before < int(k):  # an iteration (LIBLINEAR's pass), within the caller's budget
                istate[1] += 1
            istate[0] = keep
            fstate[2] = viol
            if viol <= tol:
                checked_loss[0] = loss  # the fit ends at this w: its objective from the check's pass
                return 0, istate[1]
            if int(istate[1]) - before >= int(k):
                return 1, istate[1]

    def serial_epochs(k):
        serial = (y, diag, upper, QD, alpha, w, index, istate, fstate, rng, float(tol), int(k), bool(shrinking))
        if ld.dense:
            epochs = _svc_epochs_lag if ld.n_features <= LAG_MAX_FEATURES else _svc_epochs
            return epochs(*args, *serial, *plan)
        if records[0] is None:
            records[0] = row_records(y, alpha, QD, diag, upper, ld.indptr)
            narrow[0] = narrow_indices(ld)  # (the same column numbers in fewer bytes where they fit)
        R = records[0]
        epochs = record_epochs(plan, whole_rows(ld))
        left = int(k)
        while True:
            active = int(istate[0])
            done = int(istate[1])
            late = done >= COMPACT_AFTER
            if (
                compact[0] is None
                and big[0]
                and late
                and active <= COMPACT_SHARE * n
                and active * big[0] <= COMPACT_MAX_BYTES
            ):
                compact[0] = CompactRows(ld, R, narrow[0], index, active)
            if compact[0] is not None:
                opts = (rng, float(tol), left, bool(shrinking), ld.unit, ld.n_features, float(ld.bias), alpha)
                code = compact[0].run(R, w, index, istate, fstate, *opts)
                if code != 1:  # (met tol on the active rows: the check brings rows back, a new copy after it)
                    compact[0] = None
                return code
            # where a copy may come, pieces of COMPACT_EVERY epochs (the same iterates as one call) to look between
            piece = min(left, COMPACT_EVERY if late else COMPACT_AFTER - done) if big[0] else left
            before = done
            rec = (R, w, index, istate, fstate, rng, float(tol), piece, bool(shrinking), ld.unit, plan[0], plan[1])
            code = epochs(ld.data, narrow[0], ld.n_features, float(ld.bias), *rec)
            alpha[:] = R[REC_ALPHA::REC_WIDTH]
            left -= int(istate[1]) - before
            if code != 1 or left <= 0:
                return code

    par = split_threads > 1  # a single problem, threads allowed

    def primal_now():
        if folded is None:
            return svc_primal(w, full, y, C, squared, par)
        return folded_primal(w, folded, alpha, y, C, squared, par)

    def report():
        return primal_now(), fstate[2]

    if stall is not None:
        step = stall(lambda: (fstate[2], tol, istate[0], primal_now)).wrap(step)
    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="dual-cd",
    )
    if asynchronous[0]:  # stopped before the asynchronous phase ended: make w consistent with alpha
        end_async()
    alpha_sum, alpha_sq, wsq = _dual_terms(alpha, diag_full, w)
    if folded is not None:
        wsq += alpha @ (alpha * folded.mass)
    if checked_loss[0] is not None and status == "converged":
        primal = float(0.5 * wsq + checked_loss[0])  # (the check's pass at this w; see settled_rows)
    else:
        primal = primal_now()
    w = weights(w)
    dual = float(alpha_sum - 0.5 * wsq - 0.5 * alpha_sq)
    fit = LinearFit(w, alpha, primal, dual, it, fstate[2], status)
    fit.async_workers = workers
    fit.split_thread_epochs = split.thread_epochs if split is not None else 0
    fit.active = _active_rows(status, split, index, istate)
    return fit


def solve_svr(
    ld,
    y,
    C,
    epsilon,
    *,
    squared=False,
    tol=0.1,
    max_iter=1000,
    shrinking=True,
    seed=0,
    beta0=None,
    callback=None,
    callback_info=None,
    time_limit=None,
    verbose=False,
    split_threads=1,
    stall=None,
):
    """L2-regularised linear SVR by dual coordinate descent (see the module docstring).  Returns a
    :class:`LinearFit` (``dual`` = beta).  ``split_threads``: as :func:`solve_svc`'s (long rows: the features
    split between two threads, :func:`~maxmargin.solvers.dual_split.split_svr_epochs`); ``stall``: as
    :func:`solve_svc`'s (the test: the sum of the violations against ``tol`` times the first epoch's)."""
    n = y.shape[0]
    y = np.ascontiguousarray(y, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    if squared:
        lam = 0.5 / C
        upper = np.full(n, INF)
    else:
        lam = np.zeros(n)
        upper = C.copy()
    QD = sqnorms(ld)
    beta = _warm_dual(beta0, -upper, upper, n)
    w = np.zeros(ld.n_weights)
    if beta0 is not None and beta.any():
        weighted_sum(beta, w, *ld.args())
    index = np.arange(n, dtype=np.int64)
    istate = np.array([n, 0], dtype=np.int64)
    fstate = np.array([INF, -1.0, INF])
    if beta0 is not None:  # relative stopping rule: measured from beta = 0, as a cold start would
        fstate[1] = float(np.maximum(np.abs(y) - epsilon, 0.0).sum())
    rng = rng_state(seed)
    args = ld.args()
    plan = prefetch_plan(ld, alone=True)

    epochs = _svr_epochs if ld.dense else _svr_epochs_csr
    records = [None]  # the per-row records of the CSR epochs (RECORDS: made at their first call)
    split = None
    if worth_splitting(ld, split_threads):
        m = split_column(ld)
        if m is not None:
            split = SplitEpochs(ld, y, beta, QD, lam, upper, w, index, rng, m, epsilon=float(epsilon), fstate=fstate)

    def step(k):
        if split is not None:
            return split.step(k, tol, shrinking, beta, istate, fstate)
        if RECORDS and not ld.dense:
            if records[0] is None:
                records[0] = row_records(y, beta, QD, lam, upper, ld.indptr)
            R = records[0]
            run = (
                (_svr_epochs_rec_staged if whole_rows(ld) else _svr_epochs_rec_staged_head)
                if plan[1] > 1
                else _svr_epochs_rec
            )
            code = run(
                ld.data,
                narrow_indices(ld),  # (made once per LinearData)
                ld.n_features,
                float(ld.bias),
                R,
                w,
                index,
                istate,
                fstate,
                rng,
                float(epsilon),
                float(tol),
                int(k),
                bool(shrinking),
                ld.unit,
                plan[0],
                plan[1],
            )
            beta[:] = R[REC_ALPHA::REC_WIDTH]
            return code, istate[1]
        code = epochs(
            *args,
            y,
            lam,
            upper,
            QD,
            beta,
            w,
            index,
            istate,
            fstate,
            rng,
            float(epsilon),
            float(tol),
            int(k),
            bool(shrinking),
            *plan,
        )
        return code, istate[1]

    par = split_threads > 1  # (as solve_svc's)

    def report():
        return svr_primal(w, ld, y, C, epsilon, squared, par), fstate[2]

    if stall is not None:
        step = stall(
            lambda: (fstate[2], tol * fstate[1], istate[0], lambda: svr_primal(w, ld, y, C, epsilon, squared, par))
        ).wrap(step)
    status, it = drive(
        step,
        max_iter,
        tol,
        callback=callback,
        callback_info=callback_info,
        time_limit=time_limit,
        report=report,
        verbose=verbose,
        name="dual-cd",
    )
    primal = svr_primal(w, ld, y, C, epsilon, squared, par)
    dual = float(y @ beta - epsilon * np.abs(beta).sum() - 0.5 * w @ w - 0.5 * np.sum(lam * beta * beta))
    fit = LinearFit(w, beta, primal, dual, it, fstate[2], status)
    fit.active = _active_rows(status, split, index, istate)
    return fit


def _active_rows(status, split, index, istate):
    """The rows that shrinking left active when a watch stopped the epochs (status ``'stalled'``), sorted; None
    otherwise, or where the split epochs kept their own (then every row counts)."""
    if status != "stalled" or split is not None:
        return None
    return np.sort(index[: int(istate[0])])
