r"""Dual coordinate descent on two threads with the same iterates as on one: the features split in two halves.

The classifier's dual CD (:mod:`maxmargin.solvers.dual_cd`) is serial by nature: the update of row :math:`i`
needs :math:`w\cdot x_i` with every earlier update in it.  Its asynchronous variant runs rows on threads and lets
updates collide, so its iterates depend on thread timing.  This module splits the *features* instead:

- the columns below :math:`m` (:func:`split_column`) are half 0, the others and the bias half 1; CSR rows with
  sorted columns hold each half as a contiguous span, so the split costs one position a row
  (:func:`split_points`) and no copy of the data; dense rows (from :data:`SPLIT_MIN_DENSE_VALUES` columns) are
  split in the middle;
- :math:`w\cdot x_i = p_0 + p_1` with :math:`p_h` the sum over half :math:`h`'s span of the row;
- thread :math:`h` computes :math:`p_h`, posts it, reads the other half's, and both then make the *same* update
  of :math:`\alpha_i` (every input is identical, and :math:`p_0 + p_1 = p_1 + p_0` exactly); thread :math:`h`
  applies :math:`w \mathrel{+}= \Delta\alpha_i\, y_i x_i` on its own span only, so no weight has two writers.

The classifier's epochs are :func:`split_epochs`, LinearSVR's :func:`split_svr_epochs` (the same row helpers).
One exchange a row: a 64-byte line each way (~40-60 ns between the two cores of a KVM guest, measured by a
ping-pong of two threads), and each thread reads half of every row and owns half of the weights.  The visiting
order, shrinking and the stopping rule are those of :func:`maxmargin.solvers.dual_cd._svc_epochs_rec`
(LIBLINEAR's), run identically on both threads from private copies of the order, the generator and the per-row
records.  The serial mode (``t = 2``) runs the same arithmetic on one thread, so the iterates are bit for bit the
same whichever mode runs, and the driver (:class:`SplitEpochs`) may switch between them at any row.

It does when the threads stall: a thread that waits more than :data:`SPIN_LIMIT` spins for the other's post (the
other core is busy with another process, so the other thread waits for a core) gives its core away
(``sched_yield``) while it waits and flags the stall with its next post; both stop after that row, and the epochs
continue in the serial mode.  After :data:`MAX_STALLS` stalls in one fit the threads are not started again.  The
split pays for rows of about a hundred values or more (:data:`SPLIT_MIN_VALUES`): a row's work must dwarf the
exchange.  Measured (session 34, 2-core KVM guest, ``LinearSVC`` dual, against the plain serial epochs): rows of
1,055 values 0.70x the fit time, news20-like rows of 243 values 0.8-0.9x; the epochs alone 1.4-1.7x faster.
"""

from __future__ import annotations

import os
import platform
import threading
import time

import numpy as np
from llvmlite import ir
from numba import njit, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _scratch
from .._threads import cores, other_cores_busy
from ._linear_common import (
    _dense_row_axpy,
    _dense_row_dot,
    _element_pointer,
    _prefetch,
    aligned_floats,
    epoch_end,
    prefetch_span,
    shuffle_active,
    sparse_dot,
    sparse_sum,
    svr_step,
)

INF = np.inf

#: rows of fewer stored values than this on average keep the serial epochs (rows of 59 values: the exchange
#: costs as much as the half row saved) -- on a machine whose exchange takes :data:`REF_EXCHANGE_NS`; where it
#: takes longer (:func:`exchange_ns`) the rows must be longer in proportion
SPLIT_MIN_VALUES = 128
#: the exchange's round trip where :data:`SPLIT_MIN_VALUES` was measured (session 34: the two cores of an AMD
#: EPYC KVM guest, 40-60 ns).  Session 62, an Intel Xeon guest of 2 cores: 140 ns, and the split took 1.09x the
#: plain epochs' time on bigrams (248 values a row; 234 against 216 ms) and 1.13x on news20b (243; 116 against
#: 103 ms) where it had paid 0.8-0.9x on the AMD guest; longdocs (1,055) still 0.82x
REF_EXCHANGE_NS = 60.0
#: the rows' length above :data:`SPLIT_MIN_VALUES` grows this much faster than the exchange's time above
#: :data:`REF_EXCHANGE_NS` (:func:`exchange_scale`).  Session 72 (an Intel Xeon guest, exchanges timed at 86-145 ns
#: in different processes), split / plain whole fits at C = 1, tol 0.1, hinge and squared hinge: 3M values of unit
#: rows over 200,000 columns, 219 values a row 1.23-1.27, 349 0.98, 474 0.89-0.91, 654 0.87-0.95, 945 0.85-1.04;
#: rows of 258 values over 2**18 columns (a flat Zipf law) 1.01-1.33 (1.9 at C = 0.01, 3-5 epochs), news20b (243)
#: 1.34-1.42, bigrams (248) 1.26-1.59, longdocs (1,056) 0.94-0.97.  The plain proportion put the break-even at 256
#: values for 120 ns, where these rows lose 10-30%; with the margin it is 288 (145 ns: 354)
EXCHANGE_MARGIN = 1.25
#: round trips :func:`exchange_ns` times
EXCHANGE_PROBES = 4000
#: timed runs of them; the median is kept (the best of two until session 72: one low run, 86 ns where others took
#: 117-145, split rows that lose)
EXCHANGE_RUNS = 3
#: dense rows of fewer values than this keep the plain epochs (their vector sums stream the rows: 2,000 values a row
#: split gave 0.93x the time for LinearSVC, 1.05x for LinearSVR; 20,000 a row 0.72x and 0.95x)
SPLIT_MIN_DENSE_VALUES = 4096
#: ... and data of fewer stored values (~18 MB of CSR rows at 12 bytes a value; 400,000 until session 36).
#: Session 36 (Zen 4, 1 MB L2), split / serial, whole ``LinearSVC`` fits: where the rows and weights stay in cache
#: the exchange costs more than the half row saves -- CSR rows x values a row x columns: 4,000 x 128 dense rows as
#: CSR 2.0, 4,000 x 160 x 2,000 1.63, 4,000 x 151 x 5,000 (TF-IDF) 1.49-1.73, 6,000 x 200 x 10,000 1.22, 3,000 x
#: 290 x 20,000 1.16, 8,000 x 151 x 5,000 1.08, 4,000 x 178 x 100,000 1.03-1.18 (``LinearSVR``: 1.47-2.02); dense
#: rows: 100-300 x 4,096-8,000 (0.5-1.2M values) 1.03-1.20, 150 x 10,000 1.01.  From ~1.5M values it gains: CSR
#: 20,000 x 200 x 50,000 0.76, 12,000 x 200 x 10,000 0.72, 10,000 x 250 x 100,000 0.79, 3,000 x 1,000 x 100,000
#: 0.75, longdocs 0.66-0.71, news20b 0.86-1.02, 16,000 x 151 x 5,000 1.01; dense 400 x 5,000 0.88, 1,000 x 4,096
#: 0.81, 320 x 20,000 0.78, 250 x 8,000 1.07.
SPLIT_MIN_STORED = 1_500_000
#: ... or, for CSR rows of at least :data:`SPLIT_LONG_ROW` values on average, this many.  Session 60 (random unit
#: rows, whole fits at tol 0.1, split / serial, ``LinearSVC`` and ``LinearSVR`` squared loss): rows x values a row
#: x columns -- 900-1,200 x 1,000 x 50,000-500,000 0.75-0.93 (SVR 0.75-0.97), 300-400 x 3,000 x 50,000-500,000
#: 0.74-0.93 (SVR 0.82-0.92); at 600,000 values 0.90-0.98 (SVR 0.90-1.36: not split); rows of 250 values at
#: 900,000 0.93-1.16, so they keep the rule above
SPLIT_MIN_STORED_LONG = 800_000
SPLIT_LONG_ROW = 1_000
#: spins (each a ``pause``, ~10-40 ns) a thread waits for the other's post before it asks to stop
SPIN_LIMIT = 1 << 13
#: spins after which a wait is taken for a dead thread (never reached by a live one: minutes)
SPIN_FATAL = 1 << 40
#: stalls in one fit after which the serial mode runs to the end
MAX_STALLS = 2

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


# --------------------------------------------------------------------------- the exchange's instructions


@intrinsic
def _load_acquire(typingctx, arr, idx):
    """``arr[idx]`` read with acquire ordering (a spin loop's load is not hoisted; later reads see what the
    writer wrote before its release store)."""
    sig = arr.dtype(arr, idx)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "acquire", 8)

    return sig, codegen


@intrinsic
def _store_release(typingctx, arr, idx, value):
    """``arr[idx] = value`` with release ordering (earlier writes are visible before it)."""
    sig = types.void(arr, idx, arr.dtype)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        builder.store_atomic(args[2], ptr, "release", 8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _spin_pause(typingctx):
    """The x86 ``pause`` hint inside a spin loop (nothing elsewhere)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if _X86:
            fnty = ir.FunctionType(ir.VoidType(), [])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen


_POSIX = os.name == "posix"


@intrinsic
def _yield_cpu(typingctx):
    """``sched_yield()`` (POSIX; nothing elsewhere): a waiting thread gives its core to a runnable one -- the other
    half's thread, when a busy process holds the other core."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if _POSIX:
            fnty = ir.FunctionType(ir.IntType(32), [])
            builder.call(cgutils.get_or_insert_function(builder.module, fnty, "sched_yield"), [])
        return context.get_dummy_value()

    return sig, codegen


# --------------------------------------------------------------------------- the two halves


#: the split column is this quantile of the columns of the stored values (sampled: :data:`SPLIT_SAMPLE` of them,
#: spread evenly over the data).  Not the median: the first half holds the frequent words of text, whose weights
#: stay in cache, so its values cost less; balanced by the threads' waits on news20-like rows (243 values, median:
#: thread 0 waited 3x as long as thread 1; 0.7: thread 1 5x as long) and on 1,000-value rows (0.5: 13x, 0.6:
#: 0.4x)
SPLIT_QUANTILE = 0.58
SPLIT_SAMPLE = 1 << 14


def split_column(ld):
    """The first column of the second half: the :data:`SPLIT_QUANTILE` of the columns of the stored values (on a
    sample of :data:`SPLIT_SAMPLE`), rounded to a multiple of 8 (the halves' weights on cache lines of their own);
    half of the columns for dense rows (each costs the same); None when that leaves a half empty.  Rows that
    :func:`~maxmargin.solvers._linear_common.fold_singletons` wrote partitioned give the column they were written at
    (``ld.split_at``: the same quantile from the columns' counts)."""
    if ld.dense:
        m = ld.n_features // 2 // 8 * 8
        return m if 0 < m < ld.n_features else None
    if ld.split_at > 0:  # rows written partitioned there (fold_singletons, from the columns' counts)
        return ld.split_at
    step = max(1, ld.indices.size // SPLIT_SAMPLE)
    m = int(np.quantile(ld.indices[::step], SPLIT_QUANTILE)) // 8 * 8
    return m if 0 < m < ld.n_features else None


def split_from_counts(counts):
    """:func:`split_column` from each column's count of stored values (exact where that samples the values), or 0
    where a half would be empty."""
    nf = counts.shape[0]
    if nf < 16:
        return 0
    cum = np.cumsum(counts, dtype=np.int64)
    if cum[-1] == 0:
        return 0
    m = int(np.searchsorted(cum, SPLIT_QUANTILE * cum[-1])) // 8 * 8
    return m if 0 < m < nf else 0


@njit(cache=True, nogil=True)
def split_points(indices, indptr, m):
    """For each CSR row (column indices sorted, or at least those ``< m`` first: :func:`_partitioned`), the
    position of its first stored value in a column >= ``m`` (binary search)."""
    n = indptr.shape[0] - 1
    mid = np.empty(n, dtype=np.int64)
    for i in range(n):
        lo = indptr[i]
        hi = indptr[i + 1]
        while lo < hi:
            c = (lo + hi) >> 1
            if indices[c] < m:
                lo = c + 1
            else:
                hi = c
        mid[i] = lo
    return mid


@njit(cache=True, nogil=True)
def _rows_sorted(indices, indptr):
    """Whether every CSR row's column indices increase.  A row's test is a count without a branch (vector lanes;
    the loop that left at the first fall took 1.07 against 0.07 ms on fewwide's 1.2M values), rows stop at the first
    that falls."""
    for i in range(indptr.shape[0] - 1):
        falls = 0
        for p in range(uint64(indptr[i]) + uint64(1), uint64(indptr[i + 1])):
            falls += np.int32(indices[p] <= indices[p - uint64(1)])
        if falls:
            return False
    return True


@njit(cache=True, nogil=True)
def _partitioned(data, indices, indptr, m, out_data, out_indices):
    """Into ``out_data``, ``out_indices``: copies of CSR arrays with each row's values in columns ``< m`` first, in
    their order, then the others: the two halves :func:`split_points` finds (rows of the caller in any order; a sort
    would cost ~20 ns a value, this pass ~4: 12 ms on news20b's 2.9M values)."""
    for i in range(indptr.shape[0] - 1):
        q = indptr[i]
        for p in range(indptr[i], indptr[i + 1]):
            if indices[p] < m:
                out_data[q] = data[p]
                out_indices[q] = indices[p]
                q += 1
        for p in range(indptr[i], indptr[i + 1]):
            if indices[p] >= m:
                out_data[q] = data[p]
                out_indices[q] = indices[p]
                q += 1


def worth_splitting(ld, n_threads):
    """Whether :func:`maxmargin.solvers.dual_cd.solve_svc` runs the split epochs for data ``ld`` (CSR or dense
    rows) when offered ``n_threads``: two threads and two cores this thread may use (:func:`maxmargin._threads.cores`:
    the affinity, and a Dask worker's thread count), rows long enough (:data:`SPLIT_MIN_VALUES`, longer where the
    exchange is slow: :func:`exchange_scale`; :data:`SPLIT_MIN_STORED`; :data:`SPLIT_MIN_STORED_LONG` for CSR rows of
    :data:`SPLIT_LONG_ROW` values), and the other core not busy now (:func:`other_cores_busy`)."""
    if n_threads is None or n_threads < 2 or ld.n_features < 16:
        return False
    if ld.dense and ld.n_features < SPLIT_MIN_DENSE_VALUES:
        return False
    stored = ld.Xd.size if ld.dense else ld.data.size
    rows = max(ld.n_samples, 1)
    if ld.dense:
        return stored >= SPLIT_MIN_STORED and stored >= SPLIT_MIN_VALUES * rows and cores() >= 2
    # (the cores asked only where the rows may qualify: ~10-20 us a call with cold caches, on every fit of short
    # rows before session 70; the exchange is timed on two cores only)
    may = (stored >= SPLIT_MIN_STORED and stored >= SPLIT_MIN_VALUES * rows) or (
        stored >= SPLIT_MIN_STORED_LONG and stored >= SPLIT_LONG_ROW * rows
    )
    if not may or cores() < 2:
        return False
    main, long_rows = _csr_rows_rules(stored, rows)
    # not where the other core is busy now: the split's serial mode is slower than the plain epochs (fewwide beside a
    # busy process: 1.37-1.41 of LIBLINEAR's time against 1.20-1.28).  Until session 72 the main rule split there
    # too (and exchange_ns, unmeasured while busy, gave REF_EXCHANGE_NS): beside `yes > /dev/null`, split / plain
    # longdocs 1.05-1.10, ngram-like rows (258 values over 2**18 columns) 1.30
    return (main or long_rows) and not other_cores_busy()


def _csr_rows_rules(stored, rows):
    """(the main rule, the long-row rule) of :func:`worth_splitting` for CSR data of ``stored`` values in ``rows``
    rows."""
    main = stored >= SPLIT_MIN_STORED and stored >= SPLIT_MIN_VALUES * rows
    if main:
        main = stored >= SPLIT_MIN_VALUES * rows * exchange_scale(exchange_ns())
    return main, stored >= SPLIT_MIN_STORED_LONG and stored >= SPLIT_LONG_ROW * rows


def exchange_scale(ns):
    """How much longer than :data:`SPLIT_MIN_VALUES` the rows must be where an exchange takes ``ns``: 1 up to
    :data:`REF_EXCHANGE_NS`, then in proportion with :data:`EXCHANGE_MARGIN` on the part above."""
    return max(1.0, EXCHANGE_MARGIN * ns / REF_EXCHANGE_NS - (EXCHANGE_MARGIN - 1.0))


def may_split(n_features, stored, rows):
    """Whether :func:`worth_splitting` may choose the split epochs for CSR data of ``n_features`` columns,
    ``stored`` values and ``rows`` rows (on two cores, whatever threads a caller offers and whatever runs beside):
    :func:`~maxmargin.solvers._linear_common.fold_singletons` writes its rows partitioned for the split epochs only
    then (session 63: news20b's fold 12.6 -> 10.7 ms where its rows are too short for the split)."""
    if cores() < 2 or n_features < 16:
        return False
    main, long_rows = _csr_rows_rules(stored, max(rows, 1))
    return main or long_rows


#: spins (in all) after which :func:`_ping_pong` gives up (~50 ms); it gives up too at a wait of :data:`SPIN_LIMIT`
#: spins, a stall: the other thread waits for a core
PING_PONG_MAX_SPINS = 1 << 20


@njit(cache=True, nogil=True)
def _ping_pong(t, box, n):
    """Up to ``n`` exchanges of thread ``t`` with the other (:func:`_post_and_read`'s protocol, nothing posted);
    returns the exchanges made: fewer than ``n`` when a wait reached :data:`SPIN_LIMIT` spins or the waits
    :data:`PING_PONG_MAX_SPINS` in all (the other thread then stops at its next wait)."""
    spins = 0
    for c in range(1, n + 1):
        base = (t * 2 + (c & 1)) * BOX_LINE
        _store_release(box, base + 1, float(c))
        other = ((1 - t) * 2 + (c & 1)) * BOX_LINE
        wait = 0
        while _load_acquire(box, other + 1) != float(c):
            _spin_pause()
            wait += 1
            spins += 1
            if wait >= SPIN_LIMIT or spins >= PING_PONG_MAX_SPINS:
                return c - 1
    return n


_EXCHANGE_NS = []


def _new_box():
    """The exchange's zeroed box: a 64-byte line per thread and parity, the first on a line boundary."""
    return aligned_floats(4 * BOX_LINE, zeroed=True)


def exchange_ns():
    """Nanoseconds of one exchange between two threads on this machine (:data:`EXCHANGE_PROBES` round trips, the
    median of :data:`EXCHANGE_RUNS` runs): what a split row pays beyond its half of the work
    (:func:`worth_splitting`).  Timed once a process, when the other cores are free (:func:`other_cores_busy`);
    until then, and where a run gave up (a thread waited for a core), :data:`REF_EXCHANGE_NS` is returned and
    nothing is kept."""
    if _EXCHANGE_NS:
        return _EXCHANGE_NS[0]
    if other_cores_busy():
        return REF_EXCHANGE_NS
    runs = []
    for _ in range(EXCHANGE_RUNS):
        box = _new_box()
        done = [0]
        helper = threading.Thread(target=lambda: done.__setitem__(0, _ping_pong(1, box, EXCHANGE_PROBES)), daemon=True)
        t0 = time.perf_counter()
        helper.start()
        made = _ping_pong(0, box, EXCHANGE_PROBES)
        helper.join()
        if made < EXCHANGE_PROBES or done[0] < EXCHANGE_PROBES:
            return REF_EXCHANGE_NS
        runs.append((time.perf_counter() - t0) / EXCHANGE_PROBES * 1e9)
    _EXCHANGE_NS.append(float(np.median(runs)))
    return _EXCHANGE_NS[0]


# --------------------------------------------------------------------------- the epochs

#: per-row record fields (as :mod:`maxmargin.solvers.dual_cd`'s): alpha, y, Q_ii + D_ii, D_ii, U_i, the first and
#: end of the row's values in the record owner's half, and the row's end (the serial mode reads thread 0's records
#: only: half 0 from ``R_LO`` to ``R_HI``, half 1 from there to ``R_END``)
R_ALPHA, R_Y, R_QD, R_DIAG, R_UPPER, R_LO, R_HI, R_END, R_WIDTH = 0, 1, 2, 3, 4, 5, 6, 7, 8
#: istate: active rows, epochs done, the position to resume at (-1: a new epoch), the stop code of the last call,
#: the spins this thread waited in all (what the two halves' imbalance and the exchange cost)
I_ACTIVE, I_EPOCHS, I_POS, I_CODE, I_SPINS = range(5)
#: fstate: the previous epoch's extreme projected gradients, the last violation, the current epoch's extremes
F_MAX_OLD, F_MIN_OLD, F_VIOL, F_MAX, F_MIN = range(5)
#: the exchange: a 64-byte line per thread and parity (value, sequence number, stop flag)
BOX_LINE = 8


@njit(cache=True, nogil=True, inline="always")
def _post_and_read(t, c, p, stop, box, spin_limit):
    """Thread ``t`` posts ``p`` (and its stop flag) for exchange ``c`` and waits for the other's; returns the
    other's value, its flag and the spins waited (-1 when the wait reached :data:`SPIN_FATAL`)."""
    base = (t * 2 + (c & 1)) * BOX_LINE
    box[base] = p
    box[base + 2] = stop
    _store_release(box, base + 1, float(c))
    other = ((1 - t) * 2 + (c & 1)) * BOX_LINE
    spins = 0
    while _load_acquire(box, other + 1) != float(c):
        if spins < spin_limit:
            _spin_pause()
        else:  # a stall: the other thread waits for a core (this one stops the threads at its next post)
            _yield_cpu()
        spins += 1
        if spins >= SPIN_FATAL:
            return 0.0, 1.0, -1
    return box[other], box[other + 2], spins


@njit(cache=True, nogil=True, inline="always")
def _half_dot(data, indices, lo, hi, w, unit, dense, base):
    """The sum over a half's span ``lo:hi`` of a row: CSR positions, or (``dense``) columns of the dense row that
    starts at ``data[base]``."""
    if dense:  # vector lanes (the plain dense epochs' sum): the same bits in every mode, one compiled sum
        return _dense_row_dot(data[base + lo : base + hi], w[lo:hi], hi - lo)
    return sparse_sum(indices, lo, hi, w) if unit else sparse_dot(data, indices, lo, hi, w)


@njit(cache=True, nogil=True, inline="always")
def _half_axpy(data, indices, lo, hi, w, unit, d, dense, base):
    if dense:
        _dense_row_axpy(data[base + lo : base + hi], w[lo:hi], hi - lo, d)
    elif unit:
        for k in range(uint64(lo), uint64(hi)):
            w[uint64(indices[k])] += d
    else:
        for k in range(uint64(lo), uint64(hi)):
            w[uint64(indices[k])] += d * data[k]


@njit(cache=True, nogil=True, inline="always")
def _epoch_start(istate, fstate, index, active, rng, first_a, first_b):
    """``(position, a, b)`` to start an epoch at: where the threads left one (``istate[I_POS]``, with the epoch's two
    running values saved in ``fstate``), else position 0 of a new random order with ``first_a``, ``first_b``."""
    s = istate[I_POS]
    if s >= 0:
        istate[I_POS] = -1
        return s, fstate[F_MAX], fstate[F_MIN]
    shuffle_active(index, active, rng)
    return 0, first_a, first_b


@njit(cache=True, nogil=True, inline="always")
def _prefetch_ahead(t, s, active, index, Rt, data, indices, unit, dense):
    """The record 8 rows ahead and the span(s) 4 rows ahead (CSR: this thread's span; both in the serial mode)."""
    W = R_WIDTH
    if s + 8 < active:
        _prefetch(Rt, W * index[s + 8])
    if s + 4 < active and not dense:  # (dense rows: the hardware prefetcher follows each row)
        r4 = W * index[s + 4]
        prefetch_span(data, indices, int(Rt[uint64(r4 + R_LO)]), int(Rt[uint64(r4 + R_HI)]), unit, True)
        if t == 2:
            prefetch_span(data, indices, int(Rt[uint64(r4 + R_HI)]), int(Rt[uint64(r4 + R_END)]), unit, True)


@njit(cache=True, nogil=True, inline="always")
def _row_output(t, Rt, r, i, data, indices, unit, dense, nf, bias, has_bias, w, c, stop_next, box, spin_limit):
    """:math:`w\\cdot x_i` as ``p_0 + p_1`` (this thread's half and the other's post, or both halves here when ``t``
    = 2); returns it with the span this thread updates (``lo``, ``end``), the dense row's start, the other's stop
    flag and the spins waited (-1: the other thread never posted)."""
    lo = int(Rt[uint64(r + R_LO)])
    hi = int(Rt[uint64(r + R_HI)])
    base = i * nf if dense else 0
    ph = _half_dot(data, indices, lo, hi, w, unit, dense, base)
    if t == 1:
        ph += bias * w[nf] if has_bias else 0.0
    if t == 2:
        hi1 = int(Rt[uint64(r + R_END)])
        p1 = _half_dot(data, indices, hi, hi1, w, unit, dense, base)
        p1 += bias * w[nf] if has_bias else 0.0
        return ph + p1, lo, hi1, base, 0.0, 0
    po, so, spins = _post_and_read(t, c, ph, stop_next, box, spin_limit)
    return ph + po, lo, hi, base, so, spins


@njit(cache=True, nogil=True, inline="always")
def _row_update(data, indices, lo, end, w, unit, d, dense, base, has_bias, nf, bias):
    """w += d x_i on this thread's span (the whole row in the serial mode: each weight gets one update a row, so the
    order of the entries does not change the bits), and the bias weight by its owner."""
    _half_axpy(data, indices, lo, end, w, unit, d, dense, base)
    if has_bias:
        w[nf] += d * bias


@njit(cache=True, nogil=True, error_model="numpy")
def split_epochs(
    t,
    data,
    indices,
    unit,
    dense,
    nf,
    bias,
    R0,
    R1,
    w,
    index,
    istate,
    fstate,
    rng,
    tol,
    n_epochs,
    shrinking,
    box,
    spin_limit,
):
    """Up to ``n_epochs`` epochs of the dual CD on the split rows (module docstring): ``t`` = 0 or 1 is the thread
    of that half (its records ``R_t`` hold the half's span of each row; the other's are not read), ``t`` = 2 runs
    both halves here from ``R0`` (``R1``'s dual variables are left behind: the caller copies them over).  The bias
    feature (``bias > 0``: weight ``w[nf]``) belongs to half 1.  ``dense``: ``data`` holds dense rows of ``nf``
    values one after the other and the records' spans are columns.  ``spin_limit``: :data:`SPIN_LIMIT`.  Returns 0
    (converged), 1 (epochs done), 2 (the threads stopped after a stall; ``istate[I_POS]`` says where the serial
    mode resumes) or 3 (the other thread never posted)."""
    n = index.shape[0]
    active = istate[I_ACTIVE]
    pg_max_old = fstate[F_MAX_OLD]
    pg_min_old = fstate[F_MIN_OLD]
    W = R_WIDTH
    Rt = R1 if t == 1 else R0
    has_bias = bias > 0 and t != 0
    c = 0  # exchanges made (the box is zeroed before the threads start)
    waited = 0
    stop_next = 0.0
    e = 0
    while e < n_epochs:
        s, pg_max, pg_min = _epoch_start(istate, fstate, index, active, rng, -INF, INF)
        while s < active:
            i = index[s]
            _prefetch_ahead(t, s, active, index, Rt, data, indices, unit, dense)
            r = W * i
            c += 1
            acc, lo, end, base, so, spins = _row_output(
                t, Rt, r, i, data, indices, unit, dense, nf, bias, has_bias, w, c, stop_next, box, spin_limit
            )
            if spins < 0:
                return 3
            waited += spins
            stop_now = t != 2 and (stop_next > 0.0 or so > 0.0)
            if spins > spin_limit:
                stop_next = 1.0
            yi = Rt[uint64(r + R_Y)]
            a = Rt[uint64(r + R_ALPHA)]
            up = Rt[uint64(r + R_UPPER)]
            G = yi * acc - 1.0 + Rt[uint64(r + R_DIAG)] * a
            PG = 0.0
            shrink = False
            if a == 0.0:
                if shrinking and G > pg_max_old:
                    shrink = True
                elif G < 0.0:
                    PG = G
            elif a == up:
                if shrinking and G < pg_min_old:
                    shrink = True
                elif G > 0.0:
                    PG = G
            else:
                PG = G
            if shrink:
                active -= 1
                index[s] = index[uint64(active)]
                index[uint64(active)] = i
            else:
                pg_max = max(pg_max, PG)
                pg_min = min(pg_min, PG)
                if abs(PG) > 1e-12:
                    na = min(max(a - G / Rt[uint64(r + R_QD)], 0.0), up)
                    Rt[uint64(r + R_ALPHA)] = na
                    d = (na - a) * yi
                    if d != 0.0:
                        _row_update(data, indices, lo, end, w, unit, d, dense, base, has_bias, nf, bias)
                s += 1
            if stop_now:  # both threads saw the same flags for this exchange: both stop here
                istate[I_POS] = s
                fstate[F_MAX] = pg_max
                fstate[F_MIN] = pg_min
                return _leave(istate, fstate, active, pg_max_old, pg_min_old, waited, 2)
        e += 1
        istate[I_EPOCHS] += 1
        viol = pg_max - pg_min if active > 0 else 0.0
        fstate[F_VIOL] = viol
        if viol <= tol:
            if active == n:
                return _leave(istate, fstate, active, pg_max_old, pg_min_old, waited, 0)
            active = n
            pg_max_old = INF
            pg_min_old = -INF
            continue
        pg_max_old = pg_max if pg_max > 0.0 else INF
        pg_min_old = pg_min if pg_min < 0.0 else -INF
    return _leave(istate, fstate, active, pg_max_old, pg_min_old, waited, 1)


@njit(cache=True, nogil=True, error_model="numpy")
def split_svr_epochs(
    t,
    data,
    indices,
    unit,
    dense,
    nf,
    bias,
    R0,
    R1,
    w,
    index,
    istate,
    fstate,
    rng,
    eps,
    tol,
    n_epochs,
    shrinking,
    box,
    spin_limit,
):
    """:func:`split_epochs` for LinearSVR's dual (the step and stopping rule of
    :func:`maxmargin.solvers.dual_cd._svr_epochs_rec`: records hold beta in the alpha field, lambda_i in the
    diagonal's and Q_ii without it).  ``fstate``: [largest violation of the last epoch, the first epoch's sum of
    violations (< 0: not yet), the last sum, the current epoch's largest violation and sum]."""
    n = index.shape[0]
    active = istate[I_ACTIVE]
    g_max_old = fstate[F_MAX_OLD]
    g_norm1_init = fstate[F_MIN_OLD]
    W = R_WIDTH
    Rt = R1 if t == 1 else R0
    has_bias = bias > 0 and t != 0
    c = 0
    waited = 0
    stop_next = 0.0
    e = 0
    while e < n_epochs:
        s, g_max, g_norm1 = _epoch_start(istate, fstate, index, active, rng, 0.0, 0.0)
        while s < active:
            i = index[s]
            _prefetch_ahead(t, s, active, index, Rt, data, indices, unit, dense)
            r = W * i
            c += 1
            o, lo, end, base, so, spins = _row_output(
                t, Rt, r, i, data, indices, unit, dense, nf, bias, has_bias, w, c, stop_next, box, spin_limit
            )
            if spins < 0:
                return 3
            waited += spins
            stop_now = t != 2 and (stop_next > 0.0 or so > 0.0)
            if spins > spin_limit:
                stop_next = 1.0
            b = Rt[uint64(r + R_ALPHA)]
            lam = Rt[uint64(r + R_DIAG)]
            G = o - Rt[uint64(r + R_Y)] + lam * b
            H = Rt[uint64(r + R_QD)] + lam
            shrink, viol, nb = svr_step(b, Rt[uint64(r + R_UPPER)], G, H, eps, shrinking, g_max_old)
            if shrink:
                active -= 1
                index[s] = index[uint64(active)]
                index[uint64(active)] = i
            else:
                g_max = max(g_max, viol)
                g_norm1 += viol
                if nb != b:
                    Rt[uint64(r + R_ALPHA)] = nb
                    _row_update(data, indices, lo, end, w, unit, nb - b, dense, base, has_bias, nf, bias)
                s += 1
            if stop_now:
                istate[I_POS] = s
                fstate[F_MAX] = g_max
                fstate[F_MIN] = g_norm1
                return _leave(istate, fstate, active, g_max_old, g_norm1_init, waited, 2)
        e += 1
        done, active, g_max_old, g_norm1_init = epoch_end(
            istate, fstate, g_norm1, g_norm1_init, g_max, g_max_old, tol, active, n, active == n, False
        )
        if done:
            return _leave(istate, fstate, active, g_max_old, g_norm1_init, waited, 0)
    return _leave(istate, fstate, active, g_max_old, g_norm1_init, waited, 1)


@njit(cache=True, nogil=True, inline="always")
def _leave(istate, fstate, active, pg_max_old, pg_min_old, waited, code):
    """Save the state :func:`split_epochs` resumes from; returns ``code``."""
    istate[I_ACTIVE] = active
    fstate[F_MAX_OLD] = pg_max_old
    fstate[F_MIN_OLD] = pg_min_old
    istate[I_CODE] = code
    istate[I_SPINS] += waited
    return code


# --------------------------------------------------------------------------- the driver


def _records(y, alpha, QD, diag, upper, lo, hi, end):
    R = aligned_floats(y.shape[0] * R_WIDTH).reshape(-1, R_WIDTH)
    R[:, R_ALPHA] = alpha
    R[:, R_Y] = y
    R[:, R_QD] = QD
    R[:, R_DIAG] = diag
    R[:, R_UPPER] = upper
    R[:, R_LO] = lo
    R[:, R_HI] = hi
    R[:, R_END] = end
    return R.reshape(-1)


class SplitEpochs:
    """The state of the split dual CD for one problem: the halves, per-thread records, orders, generators and
    states, and the exchange.  :meth:`run` makes epochs (threads or serial); :meth:`alpha` and
    :meth:`weights` read the iterate back in the caller's layout."""

    def __init__(self, ld, y, alpha, QD, diag, upper, w, index, rng, m, threads=True, epsilon=None, fstate=None):
        """``epsilon``: LinearSVR's dual (:func:`split_svr_epochs`; ``alpha`` is beta, ``diag`` lambda, ``QD`` the
        rows' squared norms) with its first ``fstate`` (three values); None: the classifier's."""
        self.ld = ld
        self.epsilon = epsilon
        if ld.dense:  # spans of columns, the same for every row
            nf = ld.n_features
            self.data, self.indices = ld.Xd.reshape(-1), np.empty(0, dtype=np.int32)
            starts, mid, ends = 0, m, nf
        else:
            self.data, self.indices = ld.data, ld.indices
            if ld.split_at != m and not _rows_sorted(ld.indices, ld.indptr):  # (LinearSVC takes any order)
                self.data = _scratch.empty(ld.data.shape[0], ld.data.dtype)  # (kept blocks: see maxmargin._scratch)
                self.indices = _scratch.empty(ld.indices.shape[0], ld.indices.dtype)
                _partitioned(ld.data, ld.indices, ld.indptr, m, self.data, self.indices)
            starts, mid, ends = ld.indptr[:-1], split_points(self.indices, ld.indptr, m), ld.indptr[1:]
        self.R = [
            _records(y, alpha, QD, diag, upper, starts, mid, ends),
            _records(y, alpha, QD, diag, upper, mid, ends, ends),
        ]
        self.w = w
        self.index = [index, index.copy()]
        self.rng = [rng, rng.copy()]
        self.istate = [np.array([y.shape[0], 0, -1, 0, 0], dtype=np.int64), None]
        self.fstate = [np.array([INF, -INF, INF, -INF, INF]), None]
        if fstate is not None:
            self.fstate[0][:3] = fstate
        self.box = _new_box()
        self.threads = bool(threads)
        self.stalls = 0
        self.thread_epochs = 0
        self._call(2, 0, 1.0, False)  # compiled here, before any thread waits on another

    def _call(self, t, k, tol, shrinking, out=None):
        h = 1 if t == 1 else 0
        ld = self.ld
        head = (t, self.data, self.indices, bool(ld.unit), bool(ld.dense), int(ld.n_features), float(ld.bias))
        state = (self.R[0], self.R[1], self.w, self.index[h], self.istate[h], self.fstate[h], self.rng[h])
        tail = (float(tol), int(k), bool(shrinking), self.box, int(SPIN_LIMIT))
        if self.epsilon is None:
            code = split_epochs(*head, *state, *tail)
        else:
            code = split_svr_epochs(*head, *state, float(self.epsilon), *tail)
        if out is not None:
            out[t] = code
        return code

    def run(self, k, tol, shrinking):
        """Up to ``k`` epochs; returns 0 when converged, else 1.  Two threads while they run well."""
        ist, fst = self.istate[0], self.fstate[0]
        before = int(ist[I_EPOCHS])
        if self.threads and self.stalls < MAX_STALLS and not other_cores_busy():
            # thread 1 starts from thread 0's state (the serial mode leaves its half's copies behind)
            self.R[1][R_ALPHA::R_WIDTH] = self.R[0][R_ALPHA::R_WIDTH]
            self.index[1][:] = self.index[0]
            self.rng[1][:] = self.rng[0]
            spins1 = int(self.istate[1][I_SPINS]) if self.istate[1] is not None else 0
            self.istate[1] = ist.copy()
            self.istate[1][I_SPINS] = spins1
            self.fstate[1] = fst.copy()
            self.box[:] = 0.0
            codes = [None, None]
            helper = threading.Thread(target=self._call, args=(1, k, tol, shrinking, codes), daemon=True)
            helper.start()
            try:
                self._call(0, k, tol, shrinking, codes)
            finally:
                helper.join()
            if codes[0] != codes[1] or codes[0] == 3:
                raise RuntimeError(f"split dual CD: the threads ended apart (codes {codes[0]} and {codes[1]})")
            self.thread_epochs += int(ist[I_EPOCHS]) - before
            if codes[0] != 2:
                return codes[0]
            self.stalls += 1
            k = k - (int(ist[I_EPOCHS]) - before)  # the epoch the threads left is one of these
        return self._call(2, k, tol, shrinking)

    def step(self, k, tol, shrinking, dual, istate, fstate):
        """:meth:`run` for a solver's ``step`` (:func:`~maxmargin.solvers._linear_common.drive`): the dual variables
        copied into ``dual``, the epochs into ``istate[1]`` and the last violation into ``fstate[2]``; returns
        ``(code, epochs)``."""
        code = self.run(int(k), tol, shrinking)
        dual[:] = self.alpha()
        fstate[2] = self.violation
        istate[1] = self.epochs
        return code, istate[1]

    @property
    def epochs(self):
        return int(self.istate[0][I_EPOCHS])

    @property
    def violation(self):
        return float(self.fstate[0][F_VIOL])

    @property
    def spins(self):
        """Spins each thread waited for the other (threads 0 and 1)."""
        return int(self.istate[0][I_SPINS]), int(self.istate[1][I_SPINS]) if self.istate[1] is not None else 0

    def alpha(self):
        return self.R[0][R_ALPHA::R_WIDTH].copy()
